// Package entityref holds the small read-only views one management area
// needs of another (campaigns read the catalog, billing reads vendors, ...),
// so that each area depends on an interface, not on another area's package.
// The app wires the real services in. Every method is scoped to one
// marketplace and reads the in-memory view (no network call).
package entityref

import "github.com/endcap/endcap/internal/idlist"

// ProductRef is what other areas need to know of a catalog product.
type ProductRef struct {
	ID           string
	Active       bool
	Vendors      idlist.List // vendors allowed to promote it (shares the catalog's memory)
	Categories   idlist.List
	PriceMicros  int64   // 0 when the product has no price
	QualityScore float64 // 0 when not set
}

// VendorRef is what other areas need to know of a vendor.
type VendorRef struct {
	ID       string // the catalog id (internal/vendorid derives the UUID from it)
	Name     string
	GlobalID string
}

// Catalog reads products and vendors.
type Catalog interface {
	// Vendor finds a vendor by its catalog id.
	Vendor(marketplaceID, vendorID string) (VendorRef, bool)
	// ResolveVendor finds a vendor by either of its ids: its catalog id, or
	// else its internal UUID (internal/vendorid, canonical form). Its ID is
	// the catalog id whichever was given: what the areas store.
	ResolveVendor(marketplaceID, id string) (VendorRef, bool)
	Product(marketplaceID, productID string) (ProductRef, bool)
	// EachProductOfVendor calls fn for every product (active or not) the
	// vendor may promote, until fn returns false.
	EachProductOfVendor(marketplaceID, vendorID string, fn func(ProductRef) bool)
	// ProductImageURL returns a product's imageURL ("" when it has none or
	// is unknown). It decodes the product's details: call it for a few
	// products, not for a whole catalog.
	ProductImageURL(marketplaceID, productID string) string
	// CategoryParent returns a category's parentId ("" for a root), and
	// whether the category is known.
	CategoryParent(marketplaceID, categoryID string) (parentID string, known bool)
}

// Billing reads billing contacts and their links to vendors.
type Billing interface {
	// Contact reports whether the contact exists, and whether it is linked
	// to the vendor.
	Contact(marketplaceID, contactID, vendorID string) (exists, linked bool)
}

// Marketplaces reads the settings of marketplaces.
type Marketplaces interface {
	// Reserve returns a marketplace's reserve prices in micro-units (0: no
	// reserve): a CPC or CPM bid below the reserve of its charge type never
	// competes in its auctions.
	Reserve(marketplaceID string) (cpcMicros, cpmMicros int64)
}

// Segments reads segments.
type Segments interface {
	SegmentExists(marketplaceID, segmentID string) bool
}

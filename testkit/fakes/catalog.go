// Package fakes holds small in-memory stand-ins of one interface each, for
// the unit tests of the packages that depend on it (integration tests use
// the real thing).
package fakes

import (
	"strings"
	"sync"

	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/entityref"
)

// Catalog is an in-memory entityref.Catalog. Its maps are keyed
// "<marketplace>/<id>"; a test may fill them before the catalog is shared,
// and changes them later through SetProduct and DeleteProduct.
type Catalog struct {
	mu         sync.Mutex
	Vendors    map[string]bool
	Products   map[string]entityref.ProductRef
	Images     map[string]string // product -> image URL
	Categories map[string]string // category -> parent ("" for a root)
}

var _ entityref.Catalog = (*Catalog)(nil)

// NewCatalog is a catalog of the given vendors ("<marketplace>/<vendor>").
func NewCatalog(vendors ...string) *Catalog {
	c := &Catalog{Vendors: map[string]bool{}, Products: map[string]entityref.ProductRef{}, Images: map[string]string{},
		Categories: map[string]string{}}
	for _, v := range vendors {
		c.Vendors[v] = true
	}
	return c
}

func (c *Catalog) Vendor(mp, id string) (entityref.VendorRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return entityref.VendorRef{ID: id}, c.Vendors[mp+"/"+id]
}

// ResolveVendor takes the catalog id, or else the vendor UUID of one.
func (c *Catalog) ResolveVendor(mp, id string) (entityref.VendorRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Vendors[mp+"/"+id] {
		return entityref.VendorRef{ID: id}, true
	}
	for k, ok := range c.Vendors {
		if v, found := strings.CutPrefix(k, mp+"/"); found && ok && vendorid.String(mp, v) == id {
			return entityref.VendorRef{ID: v}, true
		}
	}
	return entityref.VendorRef{}, false
}

func (c *Catalog) Product(mp, id string) (entityref.ProductRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.Products[mp+"/"+id]
	return p, ok
}

// EachProductOfVendor calls fn outside the lock, so that fn may change the
// catalog.
func (c *Catalog) EachProductOfVendor(mp, vendorID string, fn func(entityref.ProductRef) bool) {
	c.mu.Lock()
	var ps []entityref.ProductRef
	for k, p := range c.Products {
		if strings.HasPrefix(k, mp+"/") && p.Vendors.Contains(vendorID) {
			ps = append(ps, p)
		}
	}
	c.mu.Unlock()
	for _, p := range ps {
		if !fn(p) {
			return
		}
	}
}

func (c *Catalog) ProductImageURL(mp, id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Images[mp+"/"+id]
}

func (c *Catalog) CategoryParent(mp, id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.Categories[mp+"/"+id]
	return p, ok
}

// SetProduct adds or replaces a product of marketplace mp.
func (c *Catalog) SetProduct(mp string, p entityref.ProductRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Products[mp+"/"+p.ID] = p
}

// DeleteProduct removes a product of marketplace mp.
func (c *Catalog) DeleteProduct(mp, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.Products, mp+"/"+id)
}

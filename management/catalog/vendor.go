package catalog

import (
	"encoding/json"
	"math/big"
	"strconv"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/internal/vendorid"
)

// MaxVendorNameLen bounds vendor and category names.
const MaxVendorNameLen = 255

// Vendor is a vendor's stored state; the id is the entity key.
type Vendor struct {
	Name             string `json:"name"`
	ImageURL         string `json:"imageURL,omitempty"`
	MerchantCenterID *int64 `json:"merchantCenterId,omitempty"`
	GlobalID         string `json:"globalId,omitempty"`
}

// VendorInput is one vendor of an upsert request.
type VendorInput struct {
	ID               *string      `json:"id"`
	Name             *string      `json:"name"`
	ImageURL         *string      `json:"imageURL"`
	MerchantCenterID *json.Number `json:"merchant_center_id"`
	GlobalID         *string      `json:"globalId"`
}

// VendorView is a vendor on the wire: the spec's "Vendor (catalog vendor)",
// whose id is the catalog id, then the vendor's two ids as vendor charges
// name them: vendorId, its internal UUID (internal/vendorid), and
// externalVendorId, the catalog id again.
type VendorView struct {
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	ImageURL         *string `json:"imageURL"`
	MerchantCenterID *int64  `json:"merchant_center_id"`
	GlobalID         *string `json:"globalId"`
	VendorID         string  `json:"vendorId"`
	ExternalVendorID string  `json:"externalVendorId"`
}

func (v *Vendor) view(mp, id string) VendorView {
	return VendorView{ID: id, Name: v.Name, ImageURL: strPtr(v.ImageURL), MerchantCenterID: v.MerchantCenterID, GlobalID: strPtr(v.GlobalID),
		VendorID: vendorid.String(mp, id), ExternalVendorID: id}
}

func (c *checker) name(s *string, maxLen int, at []any, path ...any) string {
	if s == nil {
		c.add(validation.Missing, "Field required", loc(at, path...)...)
		return ""
	}
	return c.optString(s, maxLen, at, path...)
}

func (c *checker) vendor(in *VendorInput, at []any) (string, Vendor) {
	id := c.id(in.ID, at, "id")
	v := Vendor{
		Name:     c.name(in.Name, MaxVendorNameLen, at, "name"),
		ImageURL: c.url(in.ImageURL, at, "imageURL"),
		GlobalID: c.optString(in.GlobalID, MaxIDLen, at, "globalId"),
	}
	if in.MerchantCenterID != nil {
		n, err := strconv.ParseInt(string(*in.MerchantCenterID), 10, 64)
		if err != nil {
			// 1e3 or 12.0 are integers too; anything else is not.
			r, ok := new(big.Rat).SetString(string(*in.MerchantCenterID))
			if ok && r.IsInt() && r.Num().IsInt64() {
				n, err = r.Num().Int64(), nil
			}
		}
		switch {
		case err != nil:
			c.add("int_parsing", "Input should be a valid integer", loc(at, "merchant_center_id")...)
		case n < 1:
			c.add(validation.ValueError, "Input should be greater than 0", loc(at, "merchant_center_id")...)
		default:
			v.MerchantCenterID = &n
		}
	}
	return id, v
}

// Category is a category's stored state; the id is the entity key.
type Category struct {
	Name     string `json:"name"`
	ParentID string `json:"parentId,omitempty"`
}

// CategoryInput is one category of an upsert request.
type CategoryInput struct {
	ID       *string `json:"id"`
	Name     *string `json:"name"`
	ParentID *string `json:"parentId"`
}

// CategoryView is a category on the wire.
type CategoryView struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	ParentID *string `json:"parentId"`
}

func (c *Category) view(id string) CategoryView {
	return CategoryView{ID: id, Name: c.Name, ParentID: strPtr(c.ParentID)}
}

func (c *checker) category(in *CategoryInput, at []any) (string, Category) {
	id := c.id(in.ID, at, "id")
	cat := Category{
		Name:     c.name(in.Name, MaxVendorNameLen, at, "name"),
		ParentID: c.optString(in.ParentID, MaxIDLen, at, "parentId"),
	}
	if id != "" && cat.ParentID == id {
		c.add(validation.ValueError, "A category cannot be its own parent", loc(at, "parentId")...)
	}
	return id, cat
}

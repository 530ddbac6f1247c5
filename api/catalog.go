package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/catalog"
)

// Catalog list pages: default and maximum number of items.
const (
	catalogPageDefault = 100
	catalogPageMax     = 500
)

// CatalogRoutes serves the catalog (docs/reference/catalog.md) under
// /public/v1/catalog-search-service/catalogs. Every route is in the
// "catalog" rate-limit class.
func CatalogRoutes(svc *catalog.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &catalogHandlers{svc: svc, p: p}
		r := g.Group("/catalog-search-service/catalogs", p.Limit("catalog"))
		r.PUT("/products", h.upsertProducts)
		r.DELETE("/products", h.deleteProducts)
		r.GET("/products/*product_id", h.getProduct)
		r.PUT("/vendors", h.upsertVendors)
		r.GET("/vendors", h.listVendors)
		r.GET("/vendors/*vendor_id", h.getVendor)
		r.PUT("/categories", h.upsertCategories)
		r.GET("/categories", h.listCategories)
		r.GET("/categories/*category_id", h.getCategory)
	}
}

type catalogHandlers struct {
	svc *catalog.Service
	p   *Public
}

// catalogPathID reads a catch-all path parameter (ids may hold slashes).
func catalogPathID(c *gin.Context, name string) (string, bool) {
	id := strings.TrimPrefix(c.Param(name), "/")
	if id == "" {
		abort422(c, validation.New(validation.TooShort, "String should have at least 1 character", "path", name))
		return "", false
	}
	return id, true
}

// body reads a bulk body (up to ~1 MB for 500 products) into one buffer of
// its announced length. It answers 413 and 422 as Public.BindJSON does and
// returns ok=false then; a nil body with ok means "use BindJSON" (the
// length is not announced).
func (h *catalogHandlers) body(c *gin.Context) ([]byte, bool) {
	n := c.Request.ContentLength
	if n <= 0 || n > h.p.MaxBodyBytes {
		return nil, true // unknown length, or too large: the shared path answers
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.Request.Body, body); err != nil {
		abortV2(c, http.StatusBadRequest, "bad_request", "could not read the request body: "+err.Error())
		return nil, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		abort422(c, validation.New(validation.Missing, "Field required", "body"))
		return nil, false
	}
	return body, true
}

// bind decodes a JSON body into v with encoding/json, answering 413/422 as
// Public.BindJSON does, without the stream decoder's second copy.
func (h *catalogHandlers) bind(c *gin.Context, v any) bool {
	body, ok := h.body(c)
	if !ok {
		return false
	}
	if body == nil {
		return h.p.BindJSON(c, v)
	}
	return catalogUnmarshal(c, body, v)
}

func catalogUnmarshal(c *gin.Context, body []byte, v any) bool {
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && strings.Contains(se.Error(), "after top-level value") {
			abort422(c, validation.New("json_invalid", "JSON decode error: unexpected data after the body", "body"))
			return false
		}
		abort422(c, jsonErrors(err))
		return false
	}
	return bodyText(c, body)
}

func (h *catalogHandlers) upsertProducts(c *gin.Context) {
	raw, ok := h.body(c)
	if !ok {
		return
	}
	// The fast decoder takes the usual bodies; encoding/json decides the
	// others (and words the errors).
	products, present, fast := catalog.DecodeProducts(raw)
	if raw == nil || !fast {
		var body struct {
			Products []catalog.ProductInput `json:"products"`
		}
		if raw == nil && !h.p.BindJSON(c, &body) || raw != nil && !catalogUnmarshal(c, raw, &body) {
			return
		}
		products, present = body.Products, body.Products != nil
	} else if !bodyText(c, raw) {
		return
	}
	res, err := h.svc.UpsertProducts(c.Request.Context(), Marketplace(c).ID, products, present, ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

func (h *catalogHandlers) deleteProducts(c *gin.Context) {
	var body struct {
		IDs []string `json:"ids"`
	}
	if !h.bind(c, &body) {
		return
	}
	res, err := h.svc.DeleteProducts(c.Request.Context(), Marketplace(c).ID, body.IDs, body.IDs != nil, ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

func (h *catalogHandlers) getProduct(c *gin.Context) {
	id, ok := catalogPathID(c, "product_id")
	if !ok {
		return
	}
	v, ver, err := h.svc.GetProduct(Marketplace(c).ID, id)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, ver)
	c.JSON(http.StatusOK, v)
}

func (h *catalogHandlers) upsertVendors(c *gin.Context) {
	var body struct {
		Vendors []catalog.VendorInput `json:"vendors"`
	}
	if !h.bind(c, &body) {
		return
	}
	res, err := h.svc.UpsertVendors(c.Request.Context(), Marketplace(c).ID, body.Vendors, body.Vendors != nil, ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

func (h *catalogHandlers) getVendor(c *gin.Context) {
	id, ok := catalogPathID(c, "vendor_id")
	if !ok {
		return
	}
	v, ver, err := h.svc.GetVendor(Marketplace(c).ID, id)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, ver)
	c.JSON(http.StatusOK, v)
}

// catalogVendorList is the spec's vendor list body.
type catalogVendorList struct {
	HasMore  bool                 `json:"hasMore"`
	Response []catalog.VendorView `json:"response"`
	NextPage *string              `json:"nextPage"`
}

func (h *catalogHandlers) listVendors(c *gin.Context) {
	globalID := c.Query("global_id")
	after, limit, ok := h.p.PageQuery(c, "catalog.vendors", globalID, catalogPageDefault, catalogPageMax)
	if !ok {
		return
	}
	vs, more := h.svc.ListVendors(Marketplace(c).ID, after, limit, globalID)
	last := ""
	if len(vs) > 0 {
		last = vs[len(vs)-1].ID
	}
	c.JSON(http.StatusOK, catalogVendorList{HasMore: more, Response: vs, NextPage: h.p.NextPage(c, "catalog.vendors", globalID, last, more)})
}

func (h *catalogHandlers) upsertCategories(c *gin.Context) {
	var body struct {
		Categories []catalog.CategoryInput `json:"categories"`
	}
	if !h.bind(c, &body) {
		return
	}
	res, err := h.svc.UpsertCategories(c.Request.Context(), Marketplace(c).ID, body.Categories, body.Categories != nil, ifMatch(c))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

func (h *catalogHandlers) getCategory(c *gin.Context) {
	id, ok := catalogPathID(c, "category_id")
	if !ok {
		return
	}
	v, ver, err := h.svc.GetCategory(Marketplace(c).ID, id)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	setETag(c, ver)
	c.JSON(http.StatusOK, v)
}

// catalogCategoryList is the category list body (shaped like the vendors').
type catalogCategoryList struct {
	HasMore  bool                   `json:"hasMore"`
	Response []catalog.CategoryView `json:"response"`
	NextPage *string                `json:"nextPage"`
}

func (h *catalogHandlers) listCategories(c *gin.Context) {
	parentID := c.Query("parent_id")
	after, limit, ok := h.p.PageQuery(c, "catalog.categories", parentID, catalogPageDefault, catalogPageMax)
	if !ok {
		return
	}
	cs, more := h.svc.ListCategories(Marketplace(c).ID, after, limit, parentID)
	last := ""
	if len(cs) > 0 {
		last = cs[len(cs)-1].ID
	}
	c.JSON(http.StatusOK, catalogCategoryList{HasMore: more, Response: cs, NextPage: h.p.NextPage(c, "catalog.categories", parentID, last, more)})
}

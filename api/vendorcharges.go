package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/reporting/vendorcharges"
)

// Vendor charges (docs/reference/vendor-charges.md).
//
//	GET /billing-service/vendor-charges?start_date=&end_date=[&limit=&next_page=&include_refused=]

// vcWriteWindow is how long one write of a response may take: the server's
// write deadline is pushed this far ahead before each streamed batch, so a
// long window streams for as long as the client keeps reading.
const vcWriteWindow = 30 * time.Second

// vcPageTimeout bounds the reads of one page.
const vcPageTimeout = 25 * time.Second

// VendorChargesRoutes returns the vendor-charges route set.
func VendorChargesRoutes(store *vendorcharges.Store) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &vendorChargeHandlers{store: store, p: p}
		g.GET("/billing-service/vendor-charges", p.Limit("default"), h.list)
	}
}

type vendorChargeHandlers struct {
	store *vendorcharges.Store
	p     *Public
}

func (h *vendorChargeHandlers) list(c *gin.Context) {
	mp := Marketplace(c)
	req, err := vendorcharges.ParseRequest(c.Request.URL.Query(), mp.ID, h.p.Cursors)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	env := req.Envelope(mp.ID, mp.Currency)
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetWriteDeadline(time.Now().Add(vcWriteWindow)) // not every writer supports it (tests)

	if req.Paged() {
		ctx, cancel := context.WithTimeout(c.Request.Context(), vcPageTimeout)
		defer cancel()
		charges, more, err := h.store.Page(ctx, mp.ID, req)
		if err != nil {
			h.fail(c, err)
			return
		}
		var next *string
		if more {
			s := req.NextPage(h.p.Cursors, mp.ID, charges[len(charges)-1].Position())
			next = &s
		}
		c.JSON(http.StatusOK, vendorcharges.PageBody(env, charges, next))
		return
	}

	ctx := c.Request.Context()
	st, err := h.store.OpenStream(ctx, mp.ID, env)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Content-Type", "application/json; charset=utf-8")
	c.Status(http.StatusOK)
	err = st.WriteTo(ctx, c.Writer, func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(vcWriteWindow))
		return rc.Flush()
	})
	if err != nil {
		// The status and part of the body are out: close the connection
		// without finishing the chunked body, so the client sees an error
		// rather than a short list.
		if ctx.Err() == nil {
			h.p.Log.ErrorContext(c, "vendor charges: stream failed", "marketplace", mp.ID, "err", err)
		}
		vcAbortConnection(c)
	}
}

// fail answers a read failure: 503 with Retry-After when ClickHouse could
// not be read, 500 otherwise.
func (h *vendorChargeHandlers) fail(c *gin.Context, err error) {
	h.p.Fail(c, err)
}

// vcAbortConnection closes the client connection under a response that has
// begun, so that the chunked body never ends and the client reads an error
// (Go: unexpected EOF) instead of a complete, short list. Gin refuses to
// hijack once the body is written, so the net/http writer under it is
// hijacked (HTTP/1.1); otherwise the write deadline is moved into the past,
// which makes net/http drop the connection when it ends the response.
func vcAbortConnection(c *gin.Context) {
	c.Abort()
	if u, ok := c.Writer.(interface{ Unwrap() http.ResponseWriter }); ok {
		if hj, ok := u.Unwrap().(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	_ = http.NewResponseController(c.Writer).SetWriteDeadline(time.Unix(1, 0))
}

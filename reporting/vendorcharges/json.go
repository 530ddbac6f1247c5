package vendorcharges

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/vendorid"
)

// Envelope is what a response says besides its charges, and whether it
// lists the charges refused for a budget (Request.IncludeRefused).
type Envelope struct {
	MarketplaceID  string // whose vendors' UUIDs the charges carry
	Window         Window
	CurrencyCode   string // ISO 4217, the marketplace's
	IncludeRefused bool
}

// chargeJSON is a vendor charge on the wire, in the spec's field order.
// vendorId is the vendor's internal UUID (internal/vendorid) and
// externalVendorId its catalog id, as the spec types them. productId and
// globalId are null when there is none (the API's convention for unset
// optional fields). refusedReason (an Endcap extension) is only
// on the entries of refused charges, which are listed only on request: a
// charge has no such field.
type chargeJSON struct {
	InteractionID    string  `json:"interactionId"`
	Timestamp        string  `json:"timestamp"`
	CampaignID       string  `json:"campaignId"`
	ProductID        *string `json:"productId"`
	VendorID         string  `json:"vendorId"`
	Amount           Amount  `json:"amount"`
	ExternalVendorID string  `json:"externalVendorId"`
	GlobalID         *string `json:"globalId"`
	RefusedReason    string  `json:"refusedReason,omitempty"`
}

// toJSON is c on the wire; vendors gives the UUIDs of the marketplace's
// vendors.
func toJSON(c Charge, vendors *vendorid.Cache) chargeJSON {
	return chargeJSON{
		InteractionID: c.InteractionID, Timestamp: timestamp.Format(time.UnixMilli(c.TimestampMs)),
		CampaignID: c.CampaignID, ProductID: optional(c.ProductID), VendorID: vendors.String(c.VendorID),
		Amount: c.Amount, ExternalVendorID: c.VendorID, GlobalID: optional(c.GlobalID),
		RefusedReason: c.RefusedReason,
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Body is the response: the spec's {data, startDate, endDate, currencyCode}
// and the API's list fields {hasMore, nextPage}. Keys are written in this
// order, data last, so that a streamed response has the same shape.
type Body struct {
	StartDate    string       `json:"startDate"`
	EndDate      string       `json:"endDate"`
	CurrencyCode string       `json:"currencyCode"`
	HasMore      bool         `json:"hasMore"`
	NextPage     *string      `json:"nextPage"`
	Data         []chargeJSON `json:"data"`
}

// PageBody is the body of one page; next is the cursor of the next page (nil
// on the last).
func PageBody(env Envelope, charges []Charge, next *string) Body {
	b := Body{StartDate: timestamp.Format(env.Window.Start()), EndDate: timestamp.Format(env.Window.End()),
		CurrencyCode: env.CurrencyCode, NextPage: next, HasMore: next != nil, Data: make([]chargeJSON, len(charges))}
	vendors := vendorid.NewCache(env.MarketplaceID)
	for i, c := range charges {
		b.Data[i] = toJSON(c, vendors)
	}
	return b
}

// Stream is a whole window being answered in one response.
type Stream struct {
	it    *Iter
	first []Charge
	env   Envelope
}

// OpenStream reads the first batch of the window, so that a failure to read
// ClickHouse can still be answered with an error status.
func (s *Store) OpenStream(ctx context.Context, marketplaceID string, env Envelope) (*Stream, error) {
	it := s.scan(marketplaceID, env.Window, nil, env.IncludeRefused)
	first, err := it.Next(ctx, s.batch)
	if err != nil {
		return nil, err
	}
	env.MarketplaceID = marketplaceID
	return &Stream{it: it, first: first, env: env}, nil
}

// WriteTo writes the body to w (the same JSON as PageBody of the whole
// window), reading and writing one batch at a time, and calls flush after
// each batch. An error after the first byte leaves the body incomplete: the
// caller must then end the response abnormally, so that the client cannot
// take a truncated list for a whole one.
func (st *Stream) WriteTo(ctx context.Context, w io.Writer, flush func() error) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	head, err := json.Marshal(Body{StartDate: timestamp.Format(st.env.Window.Start()), EndDate: timestamp.Format(st.env.Window.End()),
		CurrencyCode: st.env.CurrencyCode})
	if err != nil {
		return err
	}
	// head ends with `"data":null}`: keep everything before null.
	head = head[:len(head)-len("null}")]
	bw.Write(head)
	bw.WriteByte('[')
	batch, n := st.first, 0
	vendors := vendorid.NewCache(st.env.MarketplaceID)
	for len(batch) > 0 {
		for _, c := range batch {
			b, err := json.Marshal(toJSON(c, vendors))
			if err != nil {
				return err
			}
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.Write(b)
			n++
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		if batch, err = st.it.Next(ctx, st.it.s.batch); err != nil {
			return err
		}
	}
	bw.WriteString("]}")
	if err := bw.Flush(); err != nil {
		return err
	}
	return flush()
}

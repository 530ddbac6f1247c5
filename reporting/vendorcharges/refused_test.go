package vendorcharges

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestStoreRefused: rows of charges refused for a budget (refused_reason
// set, amount 0) are left out of the list unless asked for; asked for, they
// come in the same order among the charges, with their reason, whole or in
// pages (a cursor is a position of either list), and the default body is
// unchanged.
func TestStoreRefused(t *testing.T) {
	conn := testDB(t)
	ctx := t.Context()
	mp := uuid.NewString()
	var all, charged []Charge
	b, err := conn.PrepareBatch(ctx, chargeInsert[:len(chargeInsert)-1]+", refused_reason)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		c := Charge{InteractionID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "refused-%d", i)).String(),
			TimestampMs: base + int64(i/2)*1000, CampaignID: "camp", ProductID: "p", VendorID: "v",
			Amount: Amount{Micros: 30_000}, auctionID: uuid.NewString(), rank: 1, auctionAt: time.UnixMilli(base).UTC()}
		switch {
		case i >= 30:
			c.RefusedReason, c.Amount = "total_budget", Amount{}
		case i >= 20 && i%2 == 0:
			c.RefusedReason, c.Amount = "daily_budget", Amount{}
		}
		at := time.UnixMilli(c.TimestampMs).UTC()
		for range 2 { // and a replay
			if err := b.Append(uuid.MustParse(mp), uuid.MustParse(c.InteractionID), at, c.TimestampMs, at, "click", "e", "USD",
				c.CampaignID, c.ProductID, c.VendorID, "ext-v", "", "CPC", int64(30_000), c.Amount.Micros, c.Amount.SubMicros,
				uuid.MustParse(c.auctionID), c.rank, c.auctionAt, c.RefusedReason); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, c)
		if c.RefusedReason == "" {
			charged = append(charged, c)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	all, charged = expected(rowsOf(mp, all), mp, Window{base, base + 86_400_000}), expected(rowsOf(mp, charged), mp, Window{base, base + 86_400_000})
	w := Window{StartMs: base, EndMs: base + 86_400_000}
	s := New(conn, WithBatch(7))
	read := func(it *Iter) []Charge {
		var out []Charge
		for {
			b, err := it.Next(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				return out
			}
			out = append(out, b...)
		}
	}
	sameCharges(t, "charges only", read(s.Scan(mp, w, nil)), charged)
	sameCharges(t, "with the refused", read(s.ScanWithRefused(mp, w, nil)), all)
	if len(charged) != 25 || len(all) != 40 {
		t.Fatalf("%d charges, %d in all", len(charged), len(all))
	}

	// Pages, switching between the two lists: the positions fit both.
	var got []Charge
	r := Request{Window: w, Limit: 6, IncludeRefused: true}
	for {
		page, more, err := s.Page(ctx, mp, r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if !more {
			break
		}
		last := page[len(page)-1].Position()
		r.After = &last
	}
	sameCharges(t, "pages with the refused", got, all)

	// The bodies: without the option, no refusedReason anywhere (the body of
	// the charges alone); with it, on the refused entries only, amount 0.
	for _, inc := range []bool{false, true} {
		env := Envelope{MarketplaceID: mp, Window: w, CurrencyCode: "USD", IncludeRefused: inc}
		st, err := s.OpenStream(ctx, mp, env)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := st.WriteTo(ctx, &buf, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		want := charged
		if inc {
			want = all
		}
		page, _ := json.Marshal(PageBody(env, want, nil))
		if !bytes.Equal(buf.Bytes(), page) {
			t.Fatalf("include_refused=%v: streamed body differs from the page body", inc)
		}
		var body struct{ Data []map[string]json.RawMessage }
		if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, e := range body.Data {
			if r, ok := e["refusedReason"]; ok {
				refused++
				if string(e["amount"]) != "0" || (string(r) != `"daily_budget"` && string(r) != `"total_budget"`) {
					t.Errorf("refused entry %s", e)
				}
			} else if string(e["amount"]) != "0.03" {
				t.Errorf("charge entry %s", e)
			}
		}
		if (inc && refused != 15) || (!inc && (refused != 0 || strings.Contains(buf.String(), "refusedReason"))) {
			t.Errorf("include_refused=%v: %d refused entries", inc, refused)
		}
	}
}

func rowsOf(mp string, cs []Charge) []testRow {
	out := make([]testRow, len(cs))
	for i, c := range cs {
		out[i] = testRow{mp: mp, c: c}
	}
	return out
}

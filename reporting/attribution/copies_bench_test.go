package attribution

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

// benchBatch is a batch shaped like the fold bench's (50,000 events): 25,000
// sponsored interactions, 2,500 purchases of one to three items, and a
// result row per purchased item.
func benchBatch() (*decoded, []resultRow) {
	mp := uuid.New()
	now := time.Now().UnixMilli()
	d := &decoded{}
	for i := range 25_000 {
		t := Touch{Kind: "impression", EventID: uuid.NewString(), InteractionID: uuid.New(), OccurredMs: now + int64(i),
			ReceivedMs: now + int64(i) + 40, AuctionID: uuid.New(), AuctionMs: now - 1000, Rank: uint8(i%5 + 1),
			AdFormat: "listing", ChargeType: "CPM", CampaignID: uuid.NewString(), VendorID: fmt.Sprintf("vendor-%04d", i%700),
			EntityType: "product", EntityID: fmt.Sprintf("p-%07d", i*37%1_000_000)}
		if i%4 == 0 {
			t.Kind, t.ChargeType = "click", "CPC"
		}
		d.touches = append(d.touches, touchRow{mp: mp, mpID: mp.String(), user: fmt.Sprintf("user-%06d", i*7%100_000), t: t,
			partition: int32(i % 12), offset: int64(i)})
	}
	var out []resultRow
	for i := range 2_500 {
		p := Purchase{EventID: uuid.NewString(), UserID: fmt.Sprintf("user-%06d", i*13%100_000), OccurredMs: now + int64(i), ReceivedMs: now + int64(i) + 30}
		for j := range i%3 + 1 {
			p.Items = append(p.Items, Item{ProductID: fmt.Sprintf("p-%07d", (i+j)*41%1_000_000), UnitPriceMicros: 12_990_000, Quantity: int64(j + 1),
				VendorID: fmt.Sprintf("vendor-%04d", i%700)})
		}
		d.purchases = append(d.purchases, purchaseRow{mp: mp, mpID: mp.String(), p: p, countable: true, partition: int32(i % 12), offset: int64(i)})
	}
	for i := range d.purchases {
		p := &d.purchases[i].p
		for j := range p.Items {
			r := resultRow{mp: mp, p: p, day: localDay(time.UnixMilli(p.OccurredMs), time.UTC), currency: "EUR", item: p.Items[j],
				res: Result{ItemIndex: j, Reason: ReasonNone, Version: uint64(i)}}
			if j == 0 {
				r.res.Touch, r.res.Reason, r.res.Score, r.res.Window = &d.touches[i].t, "click_product", 1, 7*24*time.Hour
			}
			out = append(out, r)
		}
	}
	return d, out
}

// BenchmarkCopies times the attribution sink's inserts of a batch (its two
// copies at once, then the results) against the test ClickHouse: the cost
// of building and sending the blocks, which the fold pays on every batch.
func BenchmarkCopies(b *testing.B) {
	env := testenv.Get(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := testenv.ClickHouse(b, ctx, env.Config(b, nil))
	d, out := benchBatch()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := d.insertCopies(ctx, conn); err != nil {
			b.Fatal(err)
		}
		if err := insertResults(ctx, conn, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(d.touches)+len(d.purchases)+len(out))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

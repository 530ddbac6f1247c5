package spend

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
)

const day = 24 * time.Hour

func TestChargeRule(t *testing.T) {
	auctionAt := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	ms := func(d time.Duration) int64 { return auctionAt.Add(d).UnixMilli() }
	cpc := &bidtoken.Claims{ChargeType: bidtoken.CPC, AuctionTimeMs: auctionAt.UnixMilli(), PriceMicros: 1}
	cpm := &bidtoken.Claims{ChargeType: bidtoken.CPM, AuctionTimeMs: auctionAt.UnixMilli(), PriceMicros: 1}
	bogus := &bidtoken.Claims{ChargeType: 3, AuctionTimeMs: auctionAt.UnixMilli()}
	tests := []struct {
		name               string
		kind               records.Kind
		occurred, received time.Duration // after the auction
		c                  *bidtoken.Claims
		want               NoCharge
	}{
		{"CPC click", records.KindClick, time.Second, 2 * time.Second, cpc, Chargeable},
		{"CPC impression", records.KindImpression, time.Second, 2 * time.Second, cpc, NoChargeKind},
		{"CPM impression", records.KindImpression, time.Second, 2 * time.Second, cpm, Chargeable},
		{"CPM click", records.KindClick, time.Second, 2 * time.Second, cpm, NoChargeKind},
		{"unknown charge type", records.KindClick, time.Second, 2 * time.Second, bogus, NoChargeKind},
		{"click at the auction time", records.KindClick, 0, 0, cpc, Chargeable},
		{"click within the skew before the auction", records.KindClick, -ChargeSkew, time.Second, cpc, Chargeable},
		{"click just past the skew before the auction", records.KindClick, -ChargeSkew - time.Millisecond, time.Second, cpc, NoChargeBeforeAuction},
		{"impression an hour before the auction", records.KindImpression, -time.Hour, time.Second, cpm, NoChargeBeforeAuction},
		{"received at the end of the window", records.KindClick, 29 * day, ChargeWindow, cpc, Chargeable},
		{"received just after the window", records.KindClick, 29 * day, ChargeWindow + time.Millisecond, cpc, NoChargeAfterWindow},
		{"occurred in the window, received after it (late upload)", records.KindClick, 2 * day, 31 * day, cpc, NoChargeAfterWindow},
		{"impression 40 days after the auction", records.KindImpression, 40 * day, 40 * day, cpm, NoChargeAfterWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChargeRule(tc.kind, ms(tc.occurred), ms(tc.received), tc.c); got != tc.want {
				t.Errorf("chargeRule = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestChargeAmount(t *testing.T) {
	tests := []struct {
		typ       bidtoken.ChargeType
		price     int64
		micros    int64
		sub       uint16
		exactNano int64 // micros*1000 + sub: the exact amount in thousandths of a micro-unit
	}{
		{bidtoken.CPC, 1_250_000, 1_250_000, 0, 1_250_000_000},
		{bidtoken.CPC, 0, 0, 0, 0},
		{bidtoken.CPM, 2_500_000, 2_500, 0, 2_500_000},
		{bidtoken.CPM, 1_234_567, 1_234, 567, 1_234_567},
		{bidtoken.CPM, 999, 0, 999, 999},
		{bidtoken.CPM, 1, 0, 1, 1},
		{bidtoken.CPM, 9_223_372_036_854_775_807, 9_223_372_036_854_775, 807, -1},
	}
	for _, tc := range tests {
		c := &bidtoken.Claims{ChargeType: tc.typ, PriceMicros: tc.price}
		micros, sub := ChargeAmount(c)
		if micros != tc.micros || sub != tc.sub {
			t.Errorf("%s %d: (%d, %d), want (%d, %d)", tc.typ, tc.price, micros, sub, tc.micros, tc.sub)
		}
		if tc.typ == bidtoken.CPM && micros*1000+int64(sub) != tc.price {
			t.Errorf("%s %d: a thousand impressions cost %d thousandths, want exactly the price", tc.typ, tc.price, micros*1000+int64(sub))
		}
		if tc.exactNano >= 0 && micros*1000+int64(sub) != tc.exactNano {
			t.Errorf("%s %d: exact amount %d, want %d", tc.typ, tc.price, micros*1000+int64(sub), tc.exactNano)
		}
	}
}

func TestChargeKey(t *testing.T) {
	c := &bidtoken.Claims{AuctionID: uuid.MustParse("0197afbb-a67b-7718-991a-1b1c1d1e1f20"), Rank: 7}
	if got, want := ChargeKey(c, records.KindClick), "\x01\x97\xaf\xbb\xa6\x7b\x77\x18\x99\x1a\x1b\x1c\x1d\x1e\x1f\x20\x07c"; got != want {
		t.Errorf("click key %q, want %q", got, want)
	}
	c.Rank = 40
	if got, want := ChargeKey(c, records.KindImpression), "\x01\x97\xaf\xbb\xa6\x7b\x77\x18\x99\x1a\x1b\x1c\x1d\x1e\x1f\x20\x28i"; got != want {
		t.Errorf("impression key %q, want %q", got, want)
	}
}

func TestMarkerUntil(t *testing.T) {
	auctionAt := time.Date(2025, 3, 4, 12, 17, 5, 0, time.UTC)
	c := &bidtoken.Claims{AuctionTimeMs: auctionAt.UnixMilli()}
	if got, want := MarkerEpoch(c), auctionAt.Truncate(time.Hour).Unix()/3600; got != want {
		t.Errorf("epoch %d, want %d (the auction's Unix hour)", got, want)
	}
	closes := time.Date(2025, 4, 5, 13, 0, 0, 0, time.UTC) // the end of the auction's hour + 30 days + 2 days
	tests := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"charged right after the auction", auctionAt.Add(time.Second), closes},
		{"charged at the end of the window", auctionAt.Add(ChargeWindow), closes},
		{"projector a week behind", auctionAt.Add(ChargeWindow + 7*day), time.Date(2025, 4, 12, 13, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		if got := MarkerUntil(c, tc.now); !got.Equal(tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// Every auction of one hour gets the same expiry: their markers share hashes.
	other := &bidtoken.Claims{AuctionTimeMs: auctionAt.Truncate(time.Hour).Add(59*time.Minute + 59*time.Second).UnixMilli()}
	if a, b := MarkerUntil(c, auctionAt), MarkerUntil(other, auctionAt); !a.Equal(b) || MarkerEpoch(c) != MarkerEpoch(other) {
		t.Errorf("one hour, two groups: %s / %s", a, b)
	}
}

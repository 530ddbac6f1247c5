package campaigns

import (
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/management/entityref"
)

// TestEligibility: every reason, the order they are checked in, the edges
// of the reserve, and the category walk (which follows the auction's
// index: a category need not be known to be matched, a cycle ends).
func TestEligibility(t *testing.T) {
	f := newFakeRefs()
	s := &Service{cat: f, mkt: f}
	f.reserves[mpA] = [2]int64{100_000, 1_000_000}
	f.SetProduct(mpA, entityref.ProductRef{ID: "on", Active: true, Vendors: idlist.Of("v1", "v2"), Categories: idlist.Of("running", "loose")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "off", Active: false, Vendors: idlist.Of("v1")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "pic", Active: true, Vendors: idlist.Of("v3"), Categories: idlist.Of("red")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "nopic", Active: true, Vendors: idlist.Of("v3"), Categories: idlist.Of("shoes")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "gone-v", Active: true, Vendors: idlist.Of("v9")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "offonly", Active: false, Vendors: idlist.Of("v4"), Categories: idlist.Of("shoes")})
	f.Images[mpA+"/pic"] = "https://img.example/pic.png"
	f.Images[mpA+"/offonly"] = "https://img.example/off.png"
	// shoes <- running; "loose" (not upserted) names a parent never
	// upserted; a <-> b is a cycle.
	f.Categories[mpA+"/shoes"] = ""
	f.Categories[mpA+"/running"] = "shoes"
	f.Categories[mpA+"/a"] = "b"
	f.Categories[mpA+"/b"] = "a"
	f.SetProduct(mpA, entityref.ProductRef{ID: "cyc", Active: true, Vendors: idlist.Of("v5"), Categories: idlist.Of("a")})

	listings := func(vendor, charge string) Campaign {
		return Campaign{ID: "c", VendorID: vendor, Type: TypeListings, ChargeType: charge}
	}
	banners := func(vendor string) Campaign {
		return Campaign{ID: "c", VendorID: vendor, Type: TypeBanners, ChargeType: ChargeCPC}
	}
	bid := func(typ, target string, amount int64) Bid {
		return Bid{ID: "b", CampaignID: "c", TargetType: typ, Target: target, AmountMicros: amount, Active: true}
	}
	cases := []struct {
		name   string
		c      Campaign
		b      Bid
		reason string // "" eligible
		msg    string // part of the message
	}{
		{"product", listings("v1", ChargeCPC), bid(TargetProduct, "on", 500_000), "", ""},
		{"second vendor", listings("v2", ChargeCPC), bid(TargetProduct, "on", 500_000), "", ""},
		{"not found", listings("v1", ChargeCPC), bid(TargetProduct, "nope", 500_000), ReasonProductNotFound, "product nope is not in the catalog"},
		{"inactive", listings("v1", ChargeCPC), bid(TargetProduct, "off", 500_000), ReasonProductInactive, "product off is not active"},
		{"inactive before vendor", listings("v2", ChargeCPC), bid(TargetProduct, "off", 500_000), ReasonProductInactive, ""},
		{"vendor", listings("v1", ChargeCPC), bid(TargetProduct, "gone-v", 500_000), ReasonVendorNotPermitted, "vendor v1 is not among the vendors of product gone-v"},
		{"banner without image", banners("v3"), bid(TargetProduct, "nopic", 500_000), ReasonProductNoImage, "product nopic has no imageURL"},
		{"banner with image", banners("v3"), bid(TargetProduct, "pic", 500_000), "", ""},
		{"listing without image", listings("v3", ChargeCPC), bid(TargetProduct, "nopic", 500_000), "", ""},
		{"at the CPC reserve", listings("v1", ChargeCPC), bid(TargetProduct, "on", 100_000), "", ""},
		{"below the CPC reserve", listings("v1", ChargeCPC), bid(TargetProduct, "on", 99_999), ReasonBelowReserve, "the bid 0.099999 is below the marketplace's CPC reserve price 0.1"},
		{"CPM reserve", listings("v1", ChargeCPM), bid(TargetProduct, "on", 999_999), ReasonBelowReserve, "CPM reserve price 1"},
		{"at the CPM reserve", listings("v1", ChargeCPM), bid(TargetProduct, "on", 1_000_000), "", ""},
		{"product before reserve", listings("v1", ChargeCPC), bid(TargetProduct, "off", 1), ReasonProductInactive, ""},
		{"keyword", listings("v1", ChargeCPC), bid(TargetKeyword, "shoes", 200_000), "", ""},
		{"keyword below reserve", listings("v1", ChargeCPC), bid(TargetKeyword, "shoes", 50_000), ReasonBelowReserve, ""},
		{"keyword, no active product", listings("v4", ChargeCPC), bid(TargetKeyword, "shoes", 200_000), ReasonNoActiveProduct, "vendor v4 has no active product"},
		{"keyword, unknown vendor", listings("v0", ChargeCPC), bid(TargetKeyword, "shoes", 200_000), ReasonNoActiveProduct, ""},
		{"banner keyword, product with image", banners("v3"), bid(TargetKeyword, "shoes", 200_000), "", ""},
		{"banner keyword, no image", banners("v1"), bid(TargetKeyword, "shoes", 200_000), ReasonProductNoImage, "no active product of vendor v1 has an imageURL"},
		{"banner keyword, no active product", banners("v4"), bid(TargetKeyword, "shoes", 200_000), ReasonNoActiveProduct, "vendor v4 has no active product"},
		{"category itself", listings("v1", ChargeCPC), bid(TargetCategory, "running", 200_000), "", ""},
		{"category ancestor", listings("v1", ChargeCPC), bid(TargetCategory, "shoes", 200_000), "", ""},
		{"category not upserted, on the product", listings("v1", ChargeCPC), bid(TargetCategory, "loose", 200_000), "", ""},
		{"category elsewhere", listings("v3", ChargeCPC), bid(TargetCategory, "running", 200_000), ReasonNoActiveProduct, "in category running or below it"},
		{"category, product inactive", listings("v4", ChargeCPC), bid(TargetCategory, "shoes", 200_000), ReasonNoActiveProduct, ""},
		{"category in a cycle", listings("v5", ChargeCPC), bid(TargetCategory, "b", 200_000), "", ""},
		{"category, cycle ends", listings("v5", ChargeCPC), bid(TargetCategory, "shoes", 200_000), ReasonNoActiveProduct, ""},
		{"banner category with image", banners("v3"), bid(TargetCategory, "red", 200_000), "", ""},
		{"banner category without image", banners("v3"), bid(TargetCategory, "shoes", 200_000), ReasonProductNoImage, "no active product of vendor v3 in category shoes or below it has an imageURL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := s.Eligibility(mpA, c.c, c.b)
			if ok != (c.reason == "") || why.Reason != c.reason || !strings.Contains(why.Message, c.msg) || (ok && why.Message != "") || (!ok && why.Message == "") {
				t.Fatalf("got %v %+v, want reason %q with %q", ok, why, c.reason, c.msg)
			}
		})
	}
	// No reserve known (no marketplaces view, or another marketplace).
	if ok, why := (&Service{cat: f}).Eligibility(mpA, listings("v1", ChargeCPC), bid(TargetProduct, "on", 1)); !ok {
		t.Errorf("without reserves: %+v", why)
	}
	if ok, why := s.Eligibility(mpB, listings("v1", ChargeCPC), bid(TargetKeyword, "k", 1)); ok || why.Reason != ReasonNoActiveProduct {
		t.Errorf("other marketplace: %v %+v", ok, why)
	}
}

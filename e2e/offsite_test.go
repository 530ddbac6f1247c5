package e2e

import (
	"fmt"
	"strings"
	"testing"
)

func bwAdPath(vendor string) string {
	return "/public/v1/offsite-ads/ad-network/advertisers/" + vendor + "/domain"
}

// TestAdvertiserDomain: PUT (upsert) and GET of a vendor's advertiser
// domain, IDN in both forms, every 422 rule, 404s, If-Match, delete,
// isolation, rebuild from Kafka.
func TestAdvertiserDomain(t *testing.T) {
	s, cfg := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	bwVendors(t, s, A, "v-1", "v-2")
	bwVendors(t, s, B, "v-1")

	bw404(t, bwDo(t, s, "GET", bwAdPath("v-1"), A, nil, nil))
	bw404(t, bwDo(t, s, "PUT", bwAdPath("v-9"), A, `{"domain": "example.com"}`, nil))
	bw404(t, bwDo(t, s, "GET", bwAdPath("v-9"), A, nil, nil))

	r := bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": "Bücher.Example"}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	bwRateLimited(t, r)
	m := bwObj(t, r.Body)
	at := bwTime(t, m, "createdAt")
	v1JSON := fmt.Sprintf(`{"vendorId": "v-1", "domain": "xn--bcher-kva.example", "unicodeDomain": "bücher.example", "createdAt": %q, "updatedAt": %q}`, at, at)
	sameJSON(t, r.Body, v1JSON)
	r = bwDo(t, s, "GET", bwAdPath("v-1"), A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, v1JSON)
	// The same domain in its other form changes nothing.
	r = bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": "xn--bcher-kva.example."}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, v1JSON)

	// 422s.
	expect422Locs(t, bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{}`, nil), "body.domain")
	expect422Locs(t, bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": null}`, nil), "body.domain")
	expect422Locs(t, bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": 42}`, nil), "body.domain")
	expect422Locs(t, bwDo(t, s, "PUT", bwAdPath("v-1"), A, ``, nil), "body")
	expect422Locs(t, bwDo(t, s, "PUT", bwAdPath("%20"), A, `{"domain": "example.com"}`, nil), "path.vendor-id")
	for _, d := range []string{"", "https://example.com", "example.com/shop", "example.com:443", "1.2.3.4", "[2001:db8::1]", "localhost",
		"ex_ample.com", "-bad.example", "a..example", "example.123", strings.Repeat("a", 64) + ".com", "exa mple.com", "user@example.com"} {
		r := bwDo(t, s, "PUT", bwAdPath("v-1"), A, map[string]string{"domain": d}, nil)
		expect422Locs(t, r, "body.domain")
	}

	// Replace, with If-Match.
	bw409(t, bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": "shop.example.com"}`, map[string]string{"If-Match": `"2"`}))
	r = bwDo(t, s, "PUT", bwAdPath("v-1"), A, `{"domain": "SHOP.example.com"}`, map[string]string{"If-Match": `"1"`})
	bwStatus(t, r, 200)
	bwETag(t, r, "2")
	m = bwObj(t, r.Body)
	v1JSON = fmt.Sprintf(`{"vendorId": "v-1", "domain": "shop.example.com", "unicodeDomain": "shop.example.com", "createdAt": %q, "updatedAt": %q}`, at, bwTime(t, m, "updatedAt"))
	sameJSON(t, r.Body, v1JSON)
	r = bwDo(t, s, "PUT", bwAdPath("v-2"), A, `{"domain": "例え.テスト"}`, nil)
	bwStatus(t, r, 200)
	m = bwObj(t, r.Body)
	v2JSON := fmt.Sprintf(`{"vendorId": "v-2", "domain": "xn--r8jz45g.xn--zckzah", "unicodeDomain": "例え.テスト", "createdAt": %q, "updatedAt": %q}`, m["createdAt"], m["createdAt"])
	sameJSON(t, r.Body, v2JSON)

	// Isolation: B has a vendor v-1 of its own, without a domain.
	bw404(t, bwDo(t, s, "GET", bwAdPath("v-1"), B, nil, nil))
	bw404(t, bwDo(t, s, "GET", bwAdPath("v-2"), B, nil, nil))
	bw404(t, bwDo(t, s, "PUT", bwAdPath("v-2"), B, `{"domain": "evil.example"}`, nil))
	bw404(t, bwDo(t, s, "DELETE", bwAdPath("v-2"), B, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwAdPath("v-1"), B, nil, nil))
	r = bwDo(t, s, "PUT", bwAdPath("v-1"), B, `{"domain": "b.example"}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, bwDo(t, s, "GET", bwAdPath("v-1"), A, nil, nil).Body, v1JSON)
	if m := bwObj(t, bwDo(t, s, "GET", bwAdPath("v-1"), B, nil, nil).Body); m["domain"] != "b.example" {
		t.Fatalf("B's domain: %v", m)
	}

	// Delete, and set again.
	bw409(t, bwDo(t, s, "DELETE", bwAdPath("v-2"), A, nil, map[string]string{"If-Match": `"5"`}))
	r = bwDo(t, s, "DELETE", bwAdPath("v-2"), A, nil, nil)
	bwStatus(t, r, 204)
	bw404(t, bwDo(t, s, "GET", bwAdPath("v-2"), A, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwAdPath("v-2"), A, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwAdPath("v-9"), A, nil, nil))
	r = bwDo(t, s, "PUT", bwAdPath("v-2"), A, `{"domain": "again.example"}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "3")
	v2JSON = string(r.Body)

	// Restart.
	s2 := startSystem(t, cfg)
	r = bwDo(t, s2, "GET", bwAdPath("v-1"), A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "2")
	sameJSON(t, r.Body, v1JSON)
	r = bwDo(t, s2, "GET", bwAdPath("v-2"), A, nil, nil)
	bwETag(t, r, "3")
	sameJSON(t, r.Body, v2JSON)
	if m := bwObj(t, bwDo(t, s2, "GET", bwAdPath("v-1"), B, nil, nil).Body); m["domain"] != "b.example" {
		t.Fatalf("rebuilt B's domain: %v", m)
	}
}

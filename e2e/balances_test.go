package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestVendorBalances: over HTTP, a top-up with an Idempotency-Key credits
// once however often it is sent; the credit limit and the ledger; a vendor
// of another marketplace or an unknown one is 404; bad amounts are 422.
// Golden files: the balance, a top-up, the ledger.
func TestVendorBalances(t *testing.T) {
	s, _ := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	bwVendors(t, s, A, "v-1")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.App.Accounts.SetBalances(ctx, s.Marketplace.ID, true, 5_000_000); err != nil {
		t.Fatal(err)
	}
	const path = "/public/v1/billing-service/vendors/v-1/balance"
	for _, rt := range []struct{ method, path string }{{"GET", path}, {"POST", path}, {"GET", path + "/ledger"},
		{"PUT", "/public/v1/billing-service/vendors/v-1/credit-limit"}} {
		if r := bwDo(t, s, rt.method, rt.path, s.MarketplaceKey, `{}`, nil); r.Status != 403 {
			t.Fatalf("%s %s with a marketplace key: %d %s", rt.method, rt.path, r.Status, r.Body)
		}
	}
	key := map[string]string{"Idempotency-Key": "top-up-1"}
	var movement []byte
	for i := range 3 {
		r := bwDo(t, s, "POST", path, A, `{"balance": 12.5, "description": "Free credits added to the account"}`, key)
		bwStatus(t, r, 200)
		m := bwObj(t, r.Body)
		if i == 0 {
			movement = []byte(m["movementId"].(string))
			r.Body = bytes.ReplaceAll(r.Body, movement, []byte("00000000-0000-7000-8000-000000000001"))
			golden(t, "balance_topup.json", r)
		} else if m["movementId"] != string(movement) {
			t.Fatalf("retry %d: %s", i, r.Body)
		}
	}
	r := bwDo(t, s, "PUT", "/public/v1/billing-service/vendors/v-1/credit-limit", A, `{"creditLimit": 2}`, nil)
	bwStatus(t, r, 200)
	r = bwDo(t, s, "GET", path, A, nil, nil)
	bwStatus(t, r, 200)
	sameJSON(t, r.Body, `{"vendorId": "v-1", "balance": 12.5, "currencyCode": "USD", "creditLimit": 2, "available": 14.5,
		"credited": 12.5, "charged": 0, "enabled": true, "outOfFunds": false}`)
	golden(t, "balance_get.json", r)

	r = bwDo(t, s, "GET", path+"/ledger?limit=1", A, nil, nil)
	bwStatus(t, r, 200)
	m := bwObj(t, r.Body)
	if m["hasMore"] != true || len(m["movements"].([]any)) != 1 {
		t.Fatalf("ledger page 1: %s", r.Body)
	}
	next := m["nextPage"].(string)
	r = bwDo(t, s, "GET", path+"/ledger?limit=1&next_page="+next, A, nil, nil)
	bwStatus(t, r, 200)
	page := bwObj(t, r.Body)
	mv := page["movements"].([]any)[0].(map[string]any)
	if page["hasMore"] != false || mv["id"] != string(movement) || mv["kind"] != "top_up" || mv["amount"] != 12.5 {
		t.Fatalf("ledger page 2: %s", r.Body)
	}
	r.Path = "/public/v1/billing-service/vendors/v-1/balance/ledger?limit=1&next_page=CURSOR"
	r.Body = bytes.ReplaceAll(r.Body, movement, []byte("00000000-0000-7000-8000-000000000001"))
	r.Body = bytes.ReplaceAll(r.Body, []byte(mv["createdAt"].(string)), []byte("2026-03-01T09:12:44.120Z"))
	golden(t, "balance_ledger.json", r)

	// Refusals.
	for _, body := range []string{`{"balance": 0}`, `{"balance": -1}`, `{"balance": "5"}`, `{}`, `{"balance": 0.0000001}`, `{"balance": 1000000001}`} {
		if r := bwDo(t, s, "POST", path, A, body, nil); r.Status != 422 {
			t.Errorf("top-up %s: %d %s", body, r.Status, r.Body)
		}
	}
	if r := bwDo(t, s, "PUT", "/public/v1/billing-service/vendors/v-1/credit-limit", A, `{"creditLimit": -1}`, nil); r.Status != 422 {
		t.Errorf("a negative credit limit: %d %s", r.Status, r.Body)
	}
	for _, k := range []string{A, B} {
		if r := bwDo(t, s, "GET", "/public/v1/billing-service/vendors/nobody/balance", k, nil, nil); r.Status != 404 {
			t.Errorf("an unknown vendor: %d %s", r.Status, r.Body)
		}
	}
	if r := bwDo(t, s, "GET", path, B, nil, nil); r.Status != 404 {
		t.Errorf("another marketplace's vendor: %d %s", r.Status, r.Body)
	}
}

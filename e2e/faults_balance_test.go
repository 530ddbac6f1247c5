package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// balanceRunsOut is the fault suite's phase "balance runs out while
// redis is frozen" (TestFaults): a vendor's balance runs out under load
// while Redis, where the draw script keeps its funds, is frozen. In a
// marketplace of its own with balances, vendor v1 tops up 5.00 (the top-up
// sent twice with one Idempotency-Key) and has a credit limit of 1.00: 6.00,
// 24 clicks at the 0.25 reserve. Its three campaigns win 60 auctions first;
// then every winner is clicked, most twice (the same event again, and a
// second click of another id), from concurrent clients, while Redis is
// frozen for 6 s: the draws in flight time out and their batches are folded
// again, by either projector. Afterwards: the vendor never drew beyond its
// funds (tolerance none: docs/reference/balances.md), every charge drew once and no
// winner was charged twice, the charges add up to what was drawn and to the
// campaigns' spend, the rest were refused for insufficient_balance, and the
// vendor's campaigns no longer win auctions.
func balanceRunsOut(t *testing.T, s *faultStack, api *osProc) {
	began := time.Now()
	d := s.setUp(api, "Balance")
	must := func(method, path, body string, want int) []byte {
		t.Helper()
		return s.must(api, d.advKey, method, path, body, want)
	}
	s.cli("admin", "marketplace", "set-balances", "--marketplace", d.mp, "--balances", "on")
	// Two more campaigns of v1, on P2 and P3: three campaigns draw on one
	// vendor's funds.
	must("PUT", "/public/v1/catalog-search-service/catalogs/products", `{"products":[{"id":"P3","name":"P3","vendors":["v1"],"active":true}]}`, 200)
	campaigns := []string{d.campaign}
	for _, p := range []string{"P2", "P3"} {
		var c struct {
			ID string `json:"id"`
		}
		decodeJSON(t, must("POST", cpVendor("v1"), `{"name":"on `+p+`","type":"listings","chargeType":"CPC","dailyBudget":100000,"startDate":"2020-01-01T00:00:00Z"}`, 201), &c)
		must("POST", cpBids(c.ID), `{"targetType":"product","target":"`+p+`","bidAmount":0.50}`, 201)
		campaigns = append(campaigns, c.ID)
	}
	const bal = "/public/v1/billing-service/vendors/v1/"
	for range 2 {
		if st, b, err := api.call("POST", bal+"balance", d.advKey, `{"balance": 5}`, 10*time.Second, map[string]string{"Idempotency-Key": "fault-top-up"}); st != 200 {
			t.Fatalf("top-up: %d %s %v", st, b, err)
		}
	}
	must("PUT", bal+"credit-limit", `{"creditLimit": 1}`, 200)
	const funds, price = 6_000_000, 250_000

	// The winners, collected while the vendor has funds.
	products := []string{"P1", "P2", "P3"}
	var tokens []string
	testenv.Eventually(t, 30*time.Second, func() error {
		for len(tokens) < 60 {
			p := products[len(tokens)%3]
			st, b, err := api.call("POST", "/v2/auctions", d.mkKey, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["`+p+`"]}}]}`, 5*time.Second, nil)
			var out struct {
				Results []auResult `json:"results"`
			}
			if err != nil || st != 201 || json.Unmarshal(b, &out) != nil || len(out.Results) != 1 || len(out.Results[0].Winners) != 1 {
				return fmt.Errorf("auction for %s: %d %s %v", p, st, b, err)
			}
			tokens = append(tokens, out.Results[0].Winners[0].ResolvedBidID)
		}
		return nil
	})
	t.Logf("60 winners collected after %s", time.Since(began).Round(time.Millisecond))

	// Four clients click the winners, 0.15 s apart each, while Redis is
	// frozen from 1 s to 7 s: every click once, two of three again (the same
	// event) and one of three a second time under another id.
	var wg sync.WaitGroup
	errs := make(chan error, len(tokens)*3)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(tokens); i += 4 {
				at := ts(time.Now().Add(-time.Second))
				clicks := []string{fmt.Sprintf(`{"id":"bal-%d","occurredAt":%q,"opaqueUserId":"u-bal-%d","resolvedBidId":%q}`, i, at, i, tokens[i])}
				if i%3 != 0 {
					clicks = append(clicks, clicks[0])
				}
				if i%3 == 1 {
					clicks = append(clicks, fmt.Sprintf(`{"id":"bal-%d-again","occurredAt":%q,"opaqueUserId":"u-bal-%d","resolvedBidId":%q}`, i, at, i, tokens[i]))
				}
				for _, c := range clicks {
					st, b, err := api.call("POST", "/v2/events", d.mkKey, `{"clicks":[`+c+`]}`, 5*time.Second, nil)
					if st != 200 {
						errs <- fmt.Errorf("click %d: %d %s %v", i, st, b, err)
					}
				}
				time.Sleep(150 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	resume := s.pause(s.pid(localstack.ServiceRedis))
	time.Sleep(6 * time.Second)
	resume()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every click folded: 60 winners, 20 second clicks.
	testenv.Eventually(t, catchUpBound, func() error {
		rows, err := s.query("SELECT toString(uniqExact(event_id)) FROM interactions WHERE marketplace_id = ? AND kind = 'click'", d.mp)
		if err != nil {
			return err
		}
		if rows[0][0] != "80" {
			return fmt.Errorf("%s clicks folded, want 80", rows[0][0])
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f, err := spend.ReadFunds(ctx, s.redis(), d.mp, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if f.Credited != 5_000_000 || f.CreditLimit != 1_000_000 {
		t.Fatalf("funds %+v: the top-up credited twice or the limit not set", f)
	}
	// Never below −(credit limit); with one price and no budget refusals,
	// the funds are used to the last click that fits: 24 × 0.25.
	if f.Drawn > funds || f.Balance() < -f.CreditLimit {
		t.Errorf("drawn %d µ with funds of %d µ: the balance went below its credit limit", f.Drawn, funds)
	}
	if f.Drawn != funds {
		t.Errorf("drawn %d µ, want %d (24 clicks)", f.Drawn, funds)
	}
	one := func(q string, args ...any) string {
		t.Helper()
		rows, err := s.query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		return rows[0][0]
	}
	// Each charge once: no winner charged twice, and the charges marked
	// drawn are the vendor's drawn funds.
	if n := one("SELECT toString(count()) FROM (SELECT auction_id, rank FROM charges WHERE marketplace_id = ? GROUP BY auction_id, rank HAVING count() > 1)", d.mp); n != "0" {
		t.Errorf("%s winners charged more than once", n)
	}
	charges := one("SELECT toString(count()) FROM charges WHERE marketplace_id = ?", d.mp)
	drawn := one("SELECT toString(sum(amount_micros)) FROM charges WHERE marketplace_id = ? AND drawn = 1", d.mp)
	refused := one("SELECT toString(count()) FROM interactions WHERE marketplace_id = ? AND refused_reason = 'insufficient_balance'", d.mp)
	if charges != "24" || drawn != strconv.FormatInt(f.Drawn, 10) || refused != "36" {
		t.Errorf("%s charges drawing %s µ, %s refused for funds; want 24 drawing %d µ (the funds' drawn), 36 refused", charges, drawn, refused, f.Drawn)
	}
	var spent int64
	for _, c := range campaigns {
		spent += s.redisSpend(t, d.mp, c)
	}
	if spent != f.Drawn {
		t.Errorf("the campaigns spent %d µ, the vendor drew %d µ", spent, f.Drawn)
	}
	// GET balance says so, and the vendor's campaigns stop serving.
	var b struct {
		Balance, Available float64
		OutOfFunds         bool
	}
	decodeJSON(t, must("GET", bal+"balance", "", 200), &b)
	if b.Balance != -1 || b.Available != 0 || !b.OutOfFunds {
		t.Errorf("GET balance %+v, want -1, 0 available, out of funds", b)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, p := range products {
			st, body, err := api.call("POST", "/v2/auctions", d.mkKey, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["`+p+`"]}}]}`, 5*time.Second, nil)
			var out struct {
				Results []auResult `json:"results"`
			}
			if err != nil || st != 201 || json.Unmarshal(body, &out) != nil || len(out.Results) != 1 {
				return fmt.Errorf("auction for %s: %d %s %v", p, st, body, err)
			}
			if len(out.Results[0].Winners) != 0 {
				return fmt.Errorf("the vendor out of funds still wins %s", p)
			}
		}
		return nil
	})
	t.Logf("took %s", time.Since(began).Round(time.Millisecond))
}

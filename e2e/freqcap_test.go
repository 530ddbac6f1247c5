package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/testkit/testenv"
)

func fcRestrictions(id string) string { return cpBase + "/campaigns/" + id + "/restrictions" }

// fcImpression posts one impression of a winner to /v2/events.
func fcImpression(t *testing.T, s *system, token, user string) {
	t.Helper()
	body := fmt.Sprintf(`{"impressions":[{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}]}`,
		uuid.NewString(), ts(time.Now()), user, token)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), nil), 200)
}

// fcAuction runs a one-slot auction for product p1 with the extra fields
// and returns the winner's token ("" when none).
func fcAuction(t *testing.T, s *system, extra string) string {
	t.Helper()
	res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}`+extra+`}]}`)
	if len(res) != 1 || res[0].Error {
		t.Fatalf("auction: %+v", res)
	}
	if len(res[0].Winners) == 0 {
		return ""
	}
	return res[0].Winners[0].ResolvedBidID
}

// fcReason is the explain's reason for the campaign's candidate on p1
// ("" when it competes).
func fcReason(t *testing.T, s *system, campaign, extra string) string {
	t.Helper()
	_, res := exExplain(t, s, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}`+extra+`}]}`)
	for _, c := range res[0].Candidates {
		if c.CampaignID == campaign {
			if c.Outcome == "filtered" && c.Reason != nil {
				return *c.Reason
			}
			return ""
		}
	}
	t.Fatalf("campaign %s is not a candidate: %+v", campaign, res[0].Candidates)
	return ""
}

// TestFrequencyCaps is a campaign's restrictions end to end: the routes and
// their validation; a cap of two impressions a day per shopper reached
// through auctions and /v2/events (counted by the events fold), after
// which the auction no longer serves the campaign to that shopper (explain:
// frequency_capped) but still does to others; capsWithoutShopper for a
// shopper without opaqueUserId or consent; and the overshoot of a cap under
// concurrent auctions and impressions of one shopper. The next day and week
// are in auction.TestFrequencyCaps (they need the engine's clock).
func TestFrequencyCaps(t *testing.T) {
	// A loaded machine must not miss the counts' deadline (20 ms in production).
	s, _ := cpStartWith(t, func(c *config.Config) { c.FrequencyCapTimeout = 5 * time.Second })
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	camp := auCampaign(t, s, "v1", `{"name":"Capped","type":"listings","chargeType":"CPM","dailyBudget":1000,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, camp, "product", "p1", "5")

	// The types.
	r := cpDo(t, s, "GET", cpBase+"/restriction-types", key, nil, nil)
	cpStatus(t, r, 200)
	var types struct {
		RestrictionTypes []struct {
			ID                                    int
			InteractionType, FrequencyType, Level string
		}
	}
	if err := json.Unmarshal(r.Body, &types); err != nil || len(types.RestrictionTypes) != 12 {
		t.Fatalf("types: %v %s", err, r.Body)
	}
	fcGolden(t, "restriction_types.json", r)
	cpStatus(t, cpDo(t, s, "GET", cpBase+"/restriction-types/14", key, nil, nil), 200)
	cpStatus(t, cpDo(t, s, "GET", cpBase+"/restriction-types/7", key, nil, nil), 404)
	expect422Locs(t, cpDo(t, s, "GET", cpBase+"/restriction-types/x", key, nil, nil), "path.restriction_type_id")

	// Validation.
	for _, c := range []struct{ body, loc string }{
		{`{"limit":1}`, "body.restrictionTypeId"},
		{`{"restrictionTypeId":1}`, "body.limit"},
		{`{"restrictionTypeId":1,"limit":0}`, "body.limit"},
		{`{"restrictionTypeId":1,"limit":1000001}`, "body.limit"},
		{`{"restrictionTypeId":7,"limit":1}`, "body.restrictionTypeId"},
		{`{"restrictionTypeId":99,"limit":1}`, "body.restrictionTypeId"},
		{`{"interactionType":"conversions","frequencyType":"daily","level":"campaign","limit":1}`, "body.interactionType"},
		{`{"interactionType":"impressions","frequencyType":"hourly","level":"campaign","limit":1}`, "body.frequencyType"},
		{`{"interactionType":"impressions","level":"campaign","limit":1}`, "body.frequencyType"},
		{`{"restrictionTypeId":1,"level":"campaign","limit":1}`, "body.restrictionTypeId"},
		{`{"restrictionTypeId":1,"limit":1,"status":"inactive"}`, "body.status"},
	} {
		expect422Locs(t, cpDo(t, s, "POST", fcRestrictions(camp), key, c.body, nil), c.loc)
	}
	cpStatus(t, cpDo(t, s, "GET", fcRestrictions(uuid.NewString()), key, nil, nil), 404)
	expect422Locs(t, cpDo(t, s, "GET", fcRestrictions("nope"), key, nil, nil), "path.campaign_id")

	fcGolden(t, "restrictions_422.json", cpDo(t, s, "POST", fcRestrictions(camp), key, `{"interactionType":"conversions","frequencyType":"hourly","limit":0}`, nil))

	// Create, read, change.
	r = cpDo(t, s, "POST", fcRestrictions(camp), key, `{"interactionType":"impressions","frequencyType":"daily","level":"campaign","limit":3}`, nil)
	cpStatus(t, r, 201)
	fcGolden(t, "restrictions_created.json", r)
	if loc := r.Header.Get("Location"); loc != fcRestrictions(camp)+"/1" {
		t.Errorf("Location %q", loc)
	}
	sameJSON(t, []byte(fcStrip(t, r.Body)), `{"id":1,"campaignId":"`+camp+`","marketplaceId":"`+s.Marketplace.ID+
		`","restrictionType":{"id":1,"interactionType":"impressions","frequencyType":"daily","level":"campaign"},"limit":3,"status":"active"}`)
	expect422Locs(t, cpDo(t, s, "POST", fcRestrictions(camp), key, `{"restrictionTypeId":1,"limit":5}`, nil), "body.restrictionTypeId")
	r = cpDo(t, s, "GET", fcRestrictions(camp), key, nil, nil)
	cpStatus(t, r, 200)
	if !strings.Contains(string(r.Body), `"limit":3`) {
		t.Errorf("list: %s", r.Body)
	}
	fcGolden(t, "restrictions_list.json", r)
	cpStatus(t, cpDo(t, s, "GET", fcRestrictions(camp)+"/2", key, nil, nil), 404)
	expect422Locs(t, cpDo(t, s, "GET", fcRestrictions(camp)+"/0", key, nil, nil), "path.restriction_id")
	expect422Locs(t, cpDo(t, s, "PATCH", fcRestrictions(camp)+"/1", key, `{"level":"bid"}`, nil), "body.level")
	expect422Locs(t, cpDo(t, s, "PATCH", fcRestrictions(camp)+"/1", key, `{"status":"paused"}`, nil), "body.status")
	r = cpDo(t, s, "PATCH", fcRestrictions(camp)+"/1", key, `{"limit":2}`, nil)
	cpStatus(t, r, 200)
	if !strings.Contains(string(r.Body), `"limit":2`) {
		t.Errorf("patch: %s", r.Body)
	}
	expect422Locs(t, cpDo(t, s, "PATCH", cpBase+"/campaigns/"+camp, key, `{"capsWithoutShopper":"never"}`, nil), "body.capsWithoutShopper")

	// The cap reached: two impressions of the shopper, each counted by the
	// events fold before the next auction.
	user := "fc-" + uuid.NewString()
	shopper := `,"opaqueUserId":"` + user + `"`
	counted := func(n int64) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() error {
			var c freqcap.Counts
			if err := freqcap.New(s.App.Redis).Read(t.Context(), s.Marketplace.ID, user, time.Now(), s.Marketplace.Location(), &c); err != nil {
				return err
			}
			if got := c.Campaign("daily", camp, freqcap.Impression); got != n {
				return fmt.Errorf("%d impressions counted, want %d", got, n)
			}
			return nil
		})
	}
	for i := range 2 {
		tok := fcAuction(t, s, shopper)
		if tok == "" {
			t.Fatalf("impression %d: no winner", i+1)
		}
		fcImpression(t, s, tok, user)
		counted(int64(i + 1))
	}
	if tok := fcAuction(t, s, shopper); tok != "" {
		t.Error("the campaign served a shopper at its cap")
	}
	if why := fcReason(t, s, camp, shopper); why != "frequency_capped" {
		t.Errorf("explain: %q, want frequency_capped", why)
	}
	if tok := fcAuction(t, s, `,"opaqueUserId":"someone-else"`); tok == "" {
		t.Error("another shopper was not served")
	}
	// Deactivated, the restriction caps nothing.
	cpStatus(t, cpDo(t, s, "PATCH", fcRestrictions(camp)+"/1", key, `{"status":"inactive"}`, nil), 200)
	testenv.Eventually(t, 10*time.Second, func() error {
		if fcAuction(t, s, shopper) == "" {
			return fmt.Errorf("an inactive restriction still caps")
		}
		return nil
	})
	cpStatus(t, cpDo(t, s, "PATCH", fcRestrictions(camp)+"/1", key, `{"status":"active"}`, nil), 200)

	// No shopper, or no consent: served (serve, the default), or not (skip).
	denied := shopper + `,"consent":{"personalization":false}`
	for _, extra := range []string{"", denied} {
		if fcAuction(t, s, extra) == "" {
			t.Errorf("%q: not served under serve", extra)
		}
	}
	r = cpDo(t, s, "PATCH", cpBase+"/campaigns/"+camp, key, `{"capsWithoutShopper":"skip"}`, nil)
	cpStatus(t, r, 200)
	if !strings.Contains(string(r.Body), `"capsWithoutShopper":"skip"`) {
		t.Errorf("campaign: %s", r.Body)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, extra := range []string{"", denied} {
			if why := fcReason(t, s, camp, extra); why != "frequency_cap_no_shopper" {
				return fmt.Errorf("%q: %q, want frequency_cap_no_shopper", extra, why)
			}
		}
		return nil
	})
	cpStatus(t, cpDo(t, s, "PATCH", cpBase+"/campaigns/"+camp, key, `{"capsWithoutShopper":null}`, nil), 200)

	// Under load: one shopper, concurrent auctions, each winner's impression
	// sent at once. The cap sees an impression once the events fold counted
	// it: what is served meanwhile passes the cap.
	load := auCampaign(t, s, "v1", `{"name":"Load","type":"listings","chargeType":"CPM","dailyBudget":1000,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, load, "product", "p1", "9") // outbids Capped
	const limit = 5
	cpStatus(t, cpDo(t, s, "POST", fcRestrictions(load), key, fmt.Sprintf(`{"restrictionTypeId":1,"limit":%d}`, limit), nil), 201)
	user = "fc-load-" + uuid.NewString()
	shopper = `,"opaqueUserId":"` + user + `"`
	var served, auctions atomic.Int64
	var mu sync.Mutex
	var capAt, lastAt time.Time // when the limit-th impression was sent; the last one
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	body := []byte(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}` + shopper + `}]}`)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				auctions.Add(1)
				r := s.request(t, "POST", "/v2/auctions", s.MarketplaceKey, body, nil)
				var out struct{ Results []auResult }
				if err := json.Unmarshal(r.Body, &out); r.Status != 201 || err != nil || len(out.Results) != 1 {
					t.Errorf("auction: %d %s", r.Status, r.Body)
					return
				}
				if w := out.Results[0].Winners; len(w) == 1 && w[0].CampaignID == load {
					n := served.Add(1)
					ev := fmt.Sprintf(`{"impressions":[{"id":%q,"occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}]}`,
						uuid.NewString(), ts(time.Now()), user, w[0].ResolvedBidID)
					if r := s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(ev), nil); r.Status != 200 {
						t.Errorf("events: %d %s", r.Status, r.Body)
						return
					}
					mu.Lock()
					if n == limit {
						capAt = time.Now()
					}
					lastAt = time.Now()
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	camp = load
	counted(served.Load()) // every impression served is counted, once
	if res := auRun(t, s, "/v2/auctions", string(body)); len(res[0].Winners) == 1 && res[0].Winners[0].CampaignID == load {
		t.Error("the load campaign still serves the shopper once the counts caught up")
	}
	if served.Load() < limit {
		t.Errorf("served %d impressions under a cap of %d: the cap held the campaign back early", served.Load(), limit)
	}
	window := time.Duration(0)
	if !capAt.IsZero() {
		window = lastAt.Sub(capAt)
	}
	t.Logf("overshoot under load: %d auctions of one shopper in 3 s by 4 clients, %d impressions served for a cap of %d (%d over); "+
		"the last served %s after the cap's impression was accepted", auctions.Load(), served.Load(), limit, served.Load()-limit, window.Round(time.Millisecond))
}

// fcGolden records an exchange, its ids and instants replaced by stand-ins.
func fcGolden(t *testing.T, name string, r response) {
	t.Helper()
	n := &wireNorm{ids: map[string]string{}, now: time.Now()}
	r.Path = string(n.apply([]byte(r.Path)))
	r.Body = n.apply(r.Body)
	if loc := r.Header.Get("Location"); loc != "" {
		r.Header = r.Header.Clone()
		r.Header.Set("Location", string(n.apply([]byte(loc))))
	}
	golden(t, name, r)
}

// fcStrip drops createdAt and updatedAt from a restriction.
func fcStrip(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"createdAt", "updatedAt"} {
		if _, ok := m[k].(string); !ok {
			t.Errorf("%s missing: %s", k, b)
		}
		delete(m, k)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCampaignControls: dayparting and negative keywords over HTTP: the
// routes (bodies, ETags, the 422s, 404), the campaign's statusReason and
// POST /v2/auctions/explain naming the control, the keyword bid that a
// negative phrase makes ineligible.
func TestCampaignControls(t *testing.T) {
	s, _ := cpStart(t)
	A := s.AdvancedKey
	cpFixture(t, s, A)
	r := cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Controlled","type":"listings","dailyBudget":10}`, nil)
	cpStatus(t, r, 201)
	c := cpID(t, r)
	r = cpDo(t, s, "POST", cpBids(c), A, `{"targetType":"product","target":"p-1","bidAmount":0.5}`, nil)
	cpStatus(t, r, 201)
	r = cpDo(t, s, "POST", cpBids(c), A, `{"targetType":"keyword","target":"running shoes","bidAmount":0.4}`, nil)
	cpStatus(t, r, 201)
	kwBid := cpID(t, r)
	names := map[string]string{c: "c"}
	explain := func(query string) []string {
		t.Helper()
		q := ""
		if query != "" {
			q = `,"searchQuery":"` + query + `"`
		}
		_, res := exExplain(t, s, `{"auctions":[{"type":"listings","slots":3,"products":{"ids":["p-1"]}`+q+`}]}`)
		return exLines(res[0], names)
	}
	reason := func() string {
		t.Helper()
		r := cpDo(t, s, "GET", cpCampaign(c), A, nil, nil)
		cpStatus(t, r, 200)
		v, _ := cpObj(t, r.Body)["statusReason"].(string)
		return v
	}

	// Dayparting. A timetable every day that leaves out the marketplace's
	// current hour and the next (so the test holds across an hour's turn),
	// and the one after (the hour after 01:xx is 03:00 the day summer time
	// starts in New York).
	tt := cpBase + "/campaigns/" + c + "/timetables"
	r = cpDo(t, s, "GET", tt, A, nil, nil)
	cpStatus(t, r, 200)
	cpSame(t, r.Body, map[string]string{c: "<c>"}, `{"campaignId":"<c>","timetables":[]}`)
	h := time.Now().In(s.Marketplace.Location()).Hour()
	start, end := h+3, 24
	if h >= 12 {
		start, end = 1, h-1
	}
	var days []string
	for d := 1; d <= 7; d++ {
		days = append(days, fmt.Sprintf(`{"day_of_week":%d,"start_hour":%d,"end_hour":%d}`, d, start, end))
	}
	r = cpDo(t, s, "PUT", tt, A, `{"timetables":[`+strings.Join(days, ",")+`]}`, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	var got struct {
		Timetables []map[string]int `json:"timetables"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Timetables) != 7 || got.Timetables[6]["day_of_week"] != 7 {
		t.Fatalf("timetables %s (%v)", r.Body, err)
	}
	if got := reason(); got != "outside_schedule" {
		t.Errorf("statusReason %s, want outside_schedule", got)
	}
	exHas(t, "outside its hours", explain(""), "c@p-1 filtered/outside_schedule")
	// Every hour of every day: serving again (an upsert of the seven days).
	r = cpDo(t, s, "PUT", tt, A, `{"timetables":[`+strings.ReplaceAll(strings.Join(days, ","),
		fmt.Sprintf(`"start_hour":%d,"end_hour":%d`, start, end), `"start_hour":0,"end_hour":24`)+`]}`, map[string]string{"If-Match": `"2"`})
	cpStatus(t, r, 200)
	if got := reason(); got != "serving" {
		t.Errorf("statusReason %s, want serving", got)
	}
	exHas(t, "in its hours", explain(""), "c@p-1 won")
	// A stale If-Match, bad bodies, an unknown campaign.
	cp409(t, cpDo(t, s, "PUT", tt, A, `{"timetables":[{"day_of_week":1,"start_hour":0,"end_hour":24}]}`, map[string]string{"If-Match": `"2"`}))
	r = cpDo(t, s, "PUT", tt, A, `{"timetables":[{"day_of_week":8,"start_hour":9,"end_hour":9}]}`, nil)
	cpStatus(t, r, 422)
	if !strings.Contains(string(r.Body), `"loc":["body","timetables",0,"day_of_week"]`) || !strings.Contains(string(r.Body), `"type":"less_than_equal"`) {
		t.Errorf("422 %s", r.Body)
	}
	r = cpDo(t, s, "DELETE", tt+"?day_of_week=9", A, nil, nil)
	cpStatus(t, r, 422)
	cp404(t, cpDo(t, s, "GET", cpBase+"/campaigns/0193a5b0-0000-7000-8000-000000000999/timetables", A, nil, nil))
	r = cpDo(t, s, "DELETE", tt+"?day_of_week=1,2", A, nil, nil)
	cpStatus(t, r, 200)
	if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Timetables) != 5 || got.Timetables[0]["day_of_week"] != 3 {
		t.Fatalf("after deleting days 1 and 2: %s", r.Body)
	}
	cpStatus(t, cpDo(t, s, "DELETE", tt, A, nil, nil), 200)

	// Negative keywords, campaign level.
	nk := cpBase + "/campaigns/" + c + "/negative-keywords"
	r = cpDo(t, s, "PUT", nk, A, `{"negativeKeywords":[{"keyword":"Cheap  Shoes","matchType":"EXACT"},{"keyword":"free","matchType":"phrase"}]}`, nil)
	cpStatus(t, r, 200)
	cpSame(t, r.Body, map[string]string{c: "<c>"},
		`{"campaignId":"<c>","negativeKeywords":[{"keyword":"cheap shoe","matchType":"exact"},{"keyword":"free","matchType":"phrase"}]}`)
	r = cpDo(t, s, "PUT", nk, A, `{"negativeKeywords":[{"keyword":"x","matchType":"broad"}]}`, nil)
	cpStatus(t, r, 422)
	if !strings.Contains(string(r.Body), `"loc":["body","negativeKeywords",0,"matchType"]`) {
		t.Errorf("422 %s", r.Body)
	}
	exHas(t, "negative exact", explain("cheap shoes"), "c@p-1 filtered/negative_keyword")
	exHas(t, "negative phrase", explain("shoes for free"), "c@p-1 filtered/negative_keyword")
	exHas(t, "no match", explain("cheap red shoes"), "c@p-1 won")
	if got := reason(); got != "serving" {
		t.Errorf("negative keywords are no statusReason: %s", got)
	}

	// Bid level: the keyword bid's own negative phrase "running" lies within
	// its keyword, so it can never serve.
	bnk := cpBase + "/campaigns/" + c + "/bids/" + kwBid + "/negative-keywords"
	r = cpDo(t, s, "PUT", bnk, A, `{"negativeKeywords":[{"keyword":"running","matchType":"phrase"}]}`, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	cpSame(t, r.Body, map[string]string{c: "<c>", kwBid: "<b>"},
		`{"campaignId":"<c>","bidId":"<b>","negativeKeywords":[{"keyword":"running","matchType":"phrase"}]}`)
	r = cpDo(t, s, "GET", cpBids(c)+"/"+kwBid, A, nil, nil)
	cpStatus(t, r, 200)
	b := cpObj(t, r.Body)
	if b["isEligible"] != false || b["ineligibleReason"] != "negative_keyword" {
		t.Errorf("the bid: %s", r.Body)
	}
	_, res := exExplain(t, s, `{"auctions":[{"type":"listings","slots":3,"products":{"ids":["p-2"]},"searchQuery":"running shoes"}]}`)
	exHas(t, "the bid's negative", exLines(res[0], names), "c@p-2 filtered/negative_keyword")
	cp404(t, cpDo(t, s, "GET", cpBase+"/campaigns/"+c+"/bids/0193a5b0-0000-7000-8000-000000000999/negative-keywords", A, nil, nil))
	// The campaign's answer shows its negative keywords.
	r = cpDo(t, s, "GET", cpCampaign(c), A, nil, nil)
	if m := cpObj(t, r.Body); fmt.Sprint(m["negativeKeywords"]) != "[map[keyword:cheap shoe matchType:exact] map[keyword:free matchType:phrase]]" || m["timetables"] != nil {
		t.Errorf("campaign %s", r.Body)
	}
}

package console_test

import (
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/endcap/endcap/management/campaigns"
)

// TestCampaignFrequencyCaps: the campaign page lists the campaign's
// frequency caps and adds and changes them through the campaigns service,
// with the API's refusals beside the forms (422, nothing changed), a form
// of an older version of the campaign refused as a conflict (409), and the
// setting for shoppers the caps cannot count; a vendor user changes its own
// campaign's caps and not another vendor's.
func TestCampaignFrequencyCaps(t *testing.T) {
	s := start(t)
	cp, c, page, tok := s.campaignPage(t, "Capped")
	other := s.campaign(t, "v-2", "Not theirs")
	version := func() string {
		_, v, _ := s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
		return strconv.FormatInt(v, 10)
	}
	caps := func() []campaigns.Restriction {
		got, _, _ := s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
		return got.Restrictions
	}
	r := c.do("GET", page, nil)
	if r.status != 200 || !strings.Contains(r.body, "No frequency cap") || !strings.Contains(r.body, `name="version" value="`+version()+`"`) {
		t.Fatalf("page: %d", r.status)
	}
	add := url.Values{"csrf": {tok}, "version": {version()}, "interactionType": {"impressions"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"3"}}
	if r = c.do("POST", page+"/restrictions", add); r.status != 303 || !strings.HasSuffix(r.header.Get("Location"), "?done=caps#frequency-caps") {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	if got := caps(); len(got) != 1 || got[0].TypeID != 1 || got[0].Limit != 3 || !got[0].Active {
		t.Fatalf("caps %+v", got)
	}
	bid := url.Values{"csrf": {tok}, "version": {version()}, "interactionType": {"clicks"}, "frequencyType": {"weekly"}, "level": {"bid"}, "limit": {"2"}}
	if r = c.do("POST", page+"/restrictions", bid); r.status != 303 {
		t.Fatalf("add a bid-level cap: %d %s", r.status, r.body)
	}
	r = c.do("GET", page+"?done=caps", nil)
	lacks(t, r.body, `data-cap="1"`, `data-cap="2"`, "each bid", "The frequency caps were saved.")

	// The API's refusals, beside the forms, with what was sent; nothing changed.
	v := version()
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"a second of a type", url.Values{"interactionType": {"impressions"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"9"}}, "already has a restriction of type 1 (restriction 1)"},
		{"a limit of 0", url.Values{"interactionType": {"clicks"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"0"}}, "Limit: Input should be greater than or equal to 1"},
		{"no limit", url.Values{"interactionType": {"clicks"}, "frequencyType": {"daily"}, "level": {"campaign"}}, "Limit: Field required"},
		{"a limit too high", url.Values{"interactionType": {"clicks"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"1000001"}}, "Limit: Input should be less than or equal to 1000000"},
		{"not a number", url.Values{"interactionType": {"clicks"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"lots"}}, "Limit: Input should be a valid integer"},
		{"conversions", url.Values{"interactionType": {"conversions"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"1"}}, "conversions are not counted per shopper"},
		{"an unknown period", url.Values{"interactionType": {"clicks"}, "frequencyType": {"hourly"}, "level": {"campaign"}, "limit": {"1"}}, "FrequencyType: Input should be one of"},
	} {
		tc.form.Set("csrf", tok)
		tc.form.Set("version", v)
		r = c.do("POST", page+"/restrictions", tc.form)
		body := html.UnescapeString(r.body)
		if r.status != 422 || !strings.Contains(body, `data-testid="caps-error">`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, want 422 with %q; %s", tc.name, r.status, tc.want, regexp.MustCompile(`caps-error">[^<]*`).FindString(body))
		}
		if tc.form.Get("limit") != "" && !strings.Contains(body, `id="cap-limit" name="limit" type="number" min="1" max="1000000" value="`+tc.form.Get("limit")+`"`) {
			t.Errorf("%s: the form does not show what was sent", tc.name)
		}
	}
	if got := caps(); len(got) != 2 || version() != v {
		t.Fatalf("refused forms changed the caps: %+v", got)
	}

	// Change a cap: its limit and status.
	if r = c.do("POST", page+"/restrictions/1", url.Values{"csrf": {tok}, "version": {v}, "limit": {"5"}, "status": {"inactive"}}); r.status != 303 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if got := caps(); got[0].Limit != 5 || got[0].Active {
		t.Fatalf("updated %+v", got[0])
	}
	// The form of the version before: a conflict, said beside the forms, nothing changed.
	r = c.do("POST", page+"/restrictions/1", url.Values{"csrf": {tok}, "version": {v}, "limit": {"7"}, "status": {"active"}})
	if r.status != 409 || !strings.Contains(r.body, "changed meanwhile") || !strings.Contains(r.body, `name="version" value="`+version()+`"`) {
		t.Errorf("stale form: %d", r.status)
	}
	if got := caps(); got[0].Limit != 5 || got[0].Active {
		t.Fatalf("a stale form changed the cap: %+v", got[0])
	}
	for _, tc := range []struct {
		path string
		form url.Values
		code int
		want string
	}{
		{"/restrictions/1", url.Values{"limit": {""}, "status": {"active"}}, 422, "Limit: Input should be a valid integer"},
		{"/restrictions/1", url.Values{"limit": {"4"}, "status": {"paused"}}, 422, "Status: Input should be 'active' or 'inactive'"},
		{"/restrictions/9", url.Values{"limit": {"4"}, "status": {"active"}}, 404, "Restriction 9 of campaign"},
	} {
		tc.form.Set("csrf", tok)
		tc.form.Set("version", version())
		if r = c.do("POST", page+tc.path, tc.form); r.status != tc.code || !strings.Contains(html.UnescapeString(r.body), tc.want) {
			t.Errorf("update %s %v: %d, want %d with %q", tc.path, tc.form, r.status, tc.code, tc.want)
		}
	}

	// Shoppers the caps cannot count: skip, then serve again.
	if !strings.Contains(c.do("GET", page, nil).body, "<strong>Serve</strong> (the default)") {
		t.Error("the page does not say the campaign serves uncapped without a shopper")
	}
	if r = c.do("POST", page+"/caps-without-shopper", url.Values{"csrf": {tok}, "version": {version()}, "capsWithoutShopper": {"skip"}}); r.status != 303 {
		t.Fatalf("skip: %d %s", r.status, r.body)
	}
	if got, _, _ := s.a.Campaigns.Campaign(s.mp.ID, cp.ID); got.CapsWithoutShopper != campaigns.CapsSkip {
		t.Fatalf("capsWithoutShopper %q", got.CapsWithoutShopper)
	}
	if !strings.Contains(c.do("GET", page, nil).body, "<strong>Skip</strong>") {
		t.Error("the page does not say the campaign sits out without a shopper")
	}
	if r = c.do("POST", page+"/caps-without-shopper", url.Values{"csrf": {tok}, "version": {version()}, "capsWithoutShopper": {"sometimes"}}); r.status != 422 ||
		!strings.Contains(html.UnescapeString(r.body), "CapsWithoutShopper: Input should be 'serve' or 'skip'") {
		t.Errorf("a bad setting: %d", r.status)
	}

	// A vendor user: its own campaign's caps, not another vendor's.
	vu := s.vendorUser(t, "v-1", "caps@one.test")
	vtok := vu.csrf(page)
	if r = vu.do("POST", page+"/restrictions/2", url.Values{"csrf": {vtok}, "version": {version()}, "limit": {"4"}, "status": {"active"}}); r.status != 303 {
		t.Fatalf("vendor user, its campaign: %d %s", r.status, r.body)
	}
	if got := caps(); got[1].Limit != 4 {
		t.Fatalf("vendor user's change: %+v", got[1])
	}
	r = vu.do("POST", "/console/campaigns/"+other.ID+"/restrictions", url.Values{"csrf": {vtok}, "interactionType": {"clicks"}, "frequencyType": {"daily"}, "level": {"campaign"}, "limit": {"1"}})
	if r.status != 404 {
		t.Errorf("vendor user, another vendor's campaign: %d", r.status)
	}
	if got, _, _ := s.a.Campaigns.Campaign(s.mp.ID, other.ID); len(got.Restrictions) != 0 {
		t.Fatal("a vendor user capped another vendor's campaign")
	}
}

package console_test

import (
	"html"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/endcap/endcap/management/campaigns"
)

// TestCampaignControlsForms: the campaign page shows and changes the
// campaign's timetable and negative keywords; bad input is shown on the
// page (422) and changes nothing.
func TestCampaignControlsForms(t *testing.T) {
	s := start(t)
	cp, c, page, tok := s.campaignPage(t, "Dayparted")
	r := c.do("POST", page+"/timetables", url.Values{"csrf": {tok}, "start_1": {"9"}, "end_1": {"17"}, "start_6": {"0"}, "end_6": {"24"}})
	if r.status != 303 {
		t.Fatalf("timetable: %d %s", r.status, r.body)
	}
	got, _, _ := s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
	if want := []campaigns.TimetableDay{{DayOfWeek: 1, StartHour: 9, EndHour: 17}, {DayOfWeek: 6, StartHour: 0, EndHour: 24}}; !slices.Equal(got.Timetables, want) {
		t.Errorf("timetables %v, want %v", got.Timetables, want)
	}
	r = c.do("POST", page+"/negative-keywords", url.Values{"csrf": {tok}, "exact": {"Cheap Shoes\n\n"}, "phrase": {"free\nused cars"}})
	if r.status != 303 {
		t.Fatalf("negative keywords: %d %s", r.status, r.body)
	}
	got, _, _ = s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
	if want := []campaigns.NegativeKeyword{{Keyword: "cheap shoe", MatchType: "exact"}, {Keyword: "free", MatchType: "phrase"}, {Keyword: "used car", MatchType: "phrase"}}; !slices.Equal(got.NegativeKeywords, want) {
		t.Errorf("negative keywords %v, want %v", got.NegativeKeywords, want)
	}
	r = c.do("GET", page, nil)
	body := html.UnescapeString(r.body)
	lacks(t, body, `name="start_1" value="9"`, `name="end_6" value="24"`, `name="start_2" value=""`, "cheap shoe\n</textarea>", "free\nused car\n</textarea>")
	// Bad hours: 422 on the page, nothing changed.
	r = c.do("POST", page+"/timetables", url.Values{"csrf": {tok}, "start_1": {"17"}, "end_1": {"9"}})
	if r.status != 422 || !strings.Contains(html.UnescapeString(r.body), "end_hour must be greater than start_hour") {
		t.Errorf("bad hours: %d", r.status)
	}
	got, _, _ = s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
	if len(got.Timetables) != 2 {
		t.Errorf("a bad form changed the timetable: %v", got.Timetables)
	}
	// All days empty: every hour again.
	if r = c.do("POST", page+"/timetables", url.Values{"csrf": {tok}}); r.status != 303 {
		t.Fatalf("clear: %d", r.status)
	}
	if got, _, _ = s.a.Campaigns.Campaign(s.mp.ID, cp.ID); got.Timetables != nil {
		t.Errorf("cleared: %v", got.Timetables)
	}
	// Another marketplace's or an unknown campaign: not found.
	if r = c.do("POST", "/console/campaigns/nope/timetables", url.Values{"csrf": {tok}}); r.status != 404 {
		t.Errorf("unknown campaign: %d", r.status)
	}
}

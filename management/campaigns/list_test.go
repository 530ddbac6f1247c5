package campaigns

import (
	"errors"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

func TestParseFilter(t *testing.T) {
	long := strings.Repeat("é", MaxFilterLen)
	cases := []struct {
		query string
		want  Filter
		errs  []string
	}{
		{"", Filter{}, nil},
		{"limit=5&next_page=x&other=1", Filter{}, nil},
		{"vendor_id=v-1", Filter{VendorID: "v-1"}, nil},
		{"vendor_id=+v+1+", Filter{VendorID: " v 1 "}, nil}, // ids are exact
		{"status=running", Filter{Statuses: []string{"running"}}, nil},
		{"status=Running,+paused&status=archived,running", Filter{Statuses: []string{"archived", "paused", "running"}}, nil},
		{"type=automated,listings", Filter{Types: []string{"automated", "listings"}}, nil},
		{"name=+Spring+SALE+", Filter{Name: "spring sale"}, nil},
		{"name=%C3%89T%C3%89", Filter{Name: "été"}, nil},
		{"name=" + url.QueryEscape(long), Filter{Name: long}, nil},
		{"vendor_id=v&status=ended&type=banners&name=x", Filter{VendorID: "v", Statuses: []string{"ended"}, Types: []string{"banners"}, Name: "x"}, nil},
		// Errors: every bad parameter named.
		{"status=live", Filter{}, []string{"query.status:enum"}},
		{"status=running,", Filter{}, []string{"query.status:enum"}},
		{"status=", Filter{}, []string{"query.status:enum"}},
		{"type=video&status=out_of_budget", Filter{}, []string{"query.status:enum", "query.type:enum"}},
		{"vendor_id=", Filter{}, []string{"query.vendor_id:string_too_short"}},
		{"name=+++", Filter{}, []string{"query.name:string_too_short"}},
		{"name=" + url.QueryEscape(long+"x"), Filter{}, []string{"query.name:string_too_long"}},
		{"vendor_id=" + strings.Repeat("v", 256), Filter{}, []string{"query.vendor_id:string_too_long"}},
		{"vendor_id=a&vendor_id=b&name=x&name=y", Filter{}, []string{"query.name:value_error", "query.vendor_id:value_error"}},
		{"name=%FF", Filter{}, []string{"query.name:string_unicode"}},
		{"vendor_id=a%00b", Filter{}, []string{"query.vendor_id:value_error"}},
		{"status=%FF", Filter{}, []string{"query.status:string_unicode"}},
	}
	for _, tc := range cases {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFilter(q)
		if tc.errs != nil {
			if got := locs(err); !reflect.DeepEqual(got, tc.errs) {
				t.Errorf("%q: errors %v, want %v", tc.query, got, tc.errs)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(f, tc.want) {
			t.Errorf("%q: %+v %v, want %+v", tc.query, f, err, tc.want)
		}
	}
	// An error message names the allowed values.
	_, err := ParseFilter(url.Values{"status": {"live"}})
	if v, _ := validation.As(err); len(v) != 1 || v[0].Msg != "Input should be 'scheduled', 'running', 'paused', 'ended' or 'archived' (comma-separated)" {
		t.Errorf("status message: %v", err)
	}
}

func TestFilterScope(t *testing.T) {
	filters := []Filter{{}, {VendorID: "v"}, {Name: "v"}, {Statuses: []string{"running"}}, {Types: []string{"listings"}},
		{Statuses: []string{"paused", "running"}}, {VendorID: "v", Name: "x"}, {VendorID: "v\x00n=x"}}
	seen := map[string]int{}
	for i, f := range filters {
		sc := f.Scope()
		if j, dup := seen[sc]; dup {
			t.Errorf("filters %d and %d share the scope %s", j, i, sc)
		}
		seen[sc] = i
		if len(sc) != 24 {
			t.Errorf("scope %q", sc)
		}
	}
	// The same filters however they were written: one scope.
	a, _ := ParseFilter(url.Values{"status": {"running,paused"}, "name": {" X "}})
	b, _ := ParseFilter(url.Values{"status": {"Paused", "running"}, "name": {"x"}})
	if a.Scope() != b.Scope() {
		t.Errorf("equal filters, scopes %s and %s", a.Scope(), b.Scope())
	}
}

func TestContainsLower(t *testing.T) {
	for _, tc := range []struct {
		s, sub string
		want   bool
	}{
		{"Spring Sale", "spring", true},
		{"Spring Sale", "g s", true},
		{"Spring Sale", "sale", true},
		{"Spring Sale", "sales", false},
		{"Spring Sale", "", true},
		{"", "a", false},
		{"ÉTÉ 2026", "été", true},
		{"Summer ÉTÉ", "summer é", true},
		{"Straße", "straße", true},
		{"KELVIN", "k", true},
		{"abc", "é", false},
		{"[Promo]", "[promo]", true},
		{"@A", "`a", false}, // '@' is not 'A' lowered
	} {
		if got := containsLower(tc.s, tc.sub); got != tc.want {
			t.Errorf("containsLower(%q, %q) = %v", tc.s, tc.sub, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { containsLower("Spring Sale for the whole family", "family") }); n != 0 {
		t.Errorf("an ASCII name allocates %.0f times", n)
	}
}

func TestMergeSorted(t *testing.T) {
	es := func(ids ...string) []*listEntry {
		out := make([]*listEntry, len(ids))
		for i, id := range ids {
			out[i] = &listEntry{id: id}
		}
		return out
	}
	ids := func(es []*listEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.id)
		}
		return out
	}
	if got := ids(mergeSorted(es("b", "d", "f"), es("e", "a", "g", "c"))); !reflect.DeepEqual(got, []string{"a", "b", "c", "d", "e", "f", "g"}) {
		t.Errorf("merged %v", got)
	}
	if got := ids(mergeSorted(nil, es("b", "a"))); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("merged %v", got)
	}
}

// TestListAll pages the marketplace's campaigns under every combination of
// filters and checks each against the filter applied to all of them, in id
// order; campaigns imported with ids out of creation order, created while
// pages are read, and of another marketplace.
func TestListAll(t *testing.T) {
	s, _, now := newService(t)
	ctx := t.Context()
	*now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-48*time.Hour), now.Add(48*time.Hour)
	names := []string{"Spring Sale", "spring shoes", "Winter", "ÉTÉ promo", "Autumn SALE"}
	var all []Campaign
	for i := range 40 {
		c := Campaign{
			ID:       uuid.Must(uuid.NewV7()).String(),
			VendorID: []string{"v-1", "v-2", "v-3"}[i%3], Name: names[i%len(names)],
			Type: Types[i%len(Types)], ChargeType: ChargeCPC, DailyBudgetMicros: 1_000_000,
			StartDate: past, Active: i%4 != 0, CreatedAt: *now, UpdatedAt: *now,
		}
		switch i % 7 {
		case 1:
			c.StartDate = future
		case 2:
			c.EndDate = &past
		case 3:
			c.ArchivedAt = &past
		}
		all = append(all, c)
	}
	// Imported in an order that is not the ids' order.
	shuffled := slices.Clone(all)
	slices.Reverse(shuffled[10:30])
	if err := s.Import(ctx, mpA, shuffled[:25], nil); err != nil {
		t.Fatal(err)
	}
	if ids, more := s.ListAll(mpA, Filter{}, "", 100); len(ids) != 25 || more {
		t.Fatalf("first listing: %d campaigns, more %v", len(ids), more)
	}
	if err := s.Import(ctx, mpA, shuffled[25:], nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Import(ctx, mpB, []Campaign{{ID: uuid.Must(uuid.NewV7()).String(), VendorID: "v-1", Name: "Spring Sale", Type: TypeListings, ChargeType: ChargeCPC}}, nil); err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })

	page := func(f Filter, limit int) []string {
		t.Helper()
		var out []string
		after := ""
		for range 100 {
			cs, more := s.ListAll(mpA, f, after, limit)
			if len(cs) > limit || (more && len(cs) != limit) {
				t.Fatalf("%+v: a page of %d (limit %d), more %v", f, len(cs), limit, more)
			}
			for _, c := range cs {
				out = append(out, c.ID)
			}
			if !more {
				return out
			}
			after = cs[len(cs)-1].ID
		}
		t.Fatalf("%+v: the list does not end", f)
		return nil
	}
	var filters []Filter
	for _, v := range []string{"", "v-2", "v-404"} {
		for _, st := range [][]string{nil, {StatusRunning}, {StatusArchived, StatusEnded}, {StatusPaused, StatusScheduled}} {
			for _, ty := range [][]string{nil, {TypeAutomated}, {TypeBanners, TypeListings}} {
				for _, n := range []string{"", "sale", "été", "spring s", "nothing"} {
					filters = append(filters, Filter{VendorID: v, Statuses: st, Types: ty, Name: n})
				}
			}
		}
	}
	nonEmpty := 0
	for _, f := range filters {
		var want []string
		for _, c := range all {
			if (f.VendorID == "" || c.VendorID == f.VendorID) && (f.Name == "" || strings.Contains(strings.ToLower(c.Name), f.Name)) &&
				(f.Statuses == nil || slices.Contains(f.Statuses, Status(c, *now))) && (f.Types == nil || slices.Contains(f.Types, c.Type)) {
				want = append(want, c.ID)
			}
		}
		if len(want) > 0 {
			nonEmpty++
		}
		for _, limit := range []int{1, 3, 100} {
			if got := page(f, limit); !slices.Equal(got, want) {
				t.Errorf("%+v, limit %d:\n got %v\nwant %v", f, limit, got, want)
			}
		}
	}
	if nonEmpty < len(filters)/3 {
		t.Errorf("only %d of %d filters select anything: the test data does not exercise them", nonEmpty, len(filters))
	}
	// Statuses are those of the time of the request.
	running := page(Filter{Statuses: []string{StatusRunning}}, 100)
	*now = now.Add(72 * time.Hour) // the scheduled ones start
	if later := page(Filter{Statuses: []string{StatusRunning}}, 100); len(later) <= len(running) {
		t.Errorf("running: %d, then %d once the scheduled ones started", len(running), len(later))
	}

	// A campaign created between two pages is in the next page when its
	// id comes after the cursor.
	first, more := s.ListAll(mpA, Filter{}, "", 5)
	if !more {
		t.Fatal("no second page")
	}
	c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	rest := page(Filter{}, 1000)
	if !slices.Contains(rest, c.ID) || rest[0] != first[0].ID {
		t.Errorf("the new campaign is not listed")
	}
	got := []string{}
	after := first[len(first)-1].ID
	for {
		cs, more := s.ListAll(mpA, Filter{}, after, 7)
		for _, x := range cs {
			got = append(got, x.ID)
		}
		if !more {
			break
		}
		after = cs[len(cs)-1].ID
	}
	if got[len(got)-1] != c.ID || len(got)+len(first) != len(all)+1 {
		t.Errorf("pages after the creation: %d campaigns, the last %s (created %s)", len(got)+len(first), got[len(got)-1], c.ID)
	}
	// Another marketplace: its own campaign only; none for an unknown one.
	if cs, _ := s.ListAll(mpB, Filter{}, "", 100); len(cs) != 1 || cs[0].Name != "Spring Sale" {
		t.Errorf("marketplace B lists %v", cs)
	}
	if cs, more := s.ListAll("mp-none", Filter{}, "", 100); len(cs) != 0 || more {
		t.Errorf("an empty marketplace lists %v", cs)
	}
}

// TestArchiveCampaign: archiving is final and idempotent; an archived
// campaign takes part in nothing and neither it nor its bids change; it
// stays readable, listed and filterable.
func TestArchiveCampaign(t *testing.T) {
	s, _, now := newService(t)
	ctx := t.Context()
	c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`,"startDate":"2026-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, b, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":"p-1","bidAmount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.LiveBids(mpA, c)); n != 1 {
		t.Fatalf("%d live bids before the archive", n)
	}
	if _, _, err := s.ArchiveCampaign(ctx, mpA, c.ID, 7); !errors.Is(err, statelog.ErrConflict) {
		t.Errorf("stale If-Match: %v", err)
	}
	if _, _, err := s.ArchiveCampaign(ctx, mpB, c.ID, 0); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("another marketplace's campaign: %v", err)
	}
	if _, _, err := s.ArchiveCampaign(ctx, mpA, uuid.NewString(), 0); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("unknown campaign: %v", err)
	}
	a, v, err := s.ArchiveCampaign(ctx, mpA, c.ID, 1)
	if err != nil || v != 2 || a.ArchivedAt == nil || !a.ArchivedAt.Equal(*now) || !a.Active || a.Name != c.Name {
		t.Fatalf("archived: %+v v%d %v", a, v, err)
	}
	if st := Status(a, *now); st != StatusArchived {
		t.Errorf("status %s", st)
	}
	if j := s.JSON(a); j.Status != StatusArchived || j.ArchivedAt == nil || !j.ArchivedAt.Equal(*a.ArchivedAt) {
		t.Errorf("json %+v", j)
	}
	if n := len(s.LiveBids(mpA, a)); n != 0 {
		t.Errorf("%d live bids after the archive", n)
	}
	// Again (also with the If-Match of before): the same answer, no write.
	*now = now.Add(time.Hour)
	for _, ifMatch := range []statelog.IfMatch{0, 1, 2, 99} {
		again, v2, err := s.ArchiveCampaign(ctx, mpA, c.ID, ifMatch)
		if err != nil || v2 != 2 || !again.ArchivedAt.Equal(*a.ArchivedAt) {
			t.Errorf("archive again (If-Match %d): %+v v%d %v", ifMatch, again, v2, err)
		}
	}
	// Read-only: every write of it or its bids is 422 at path.campaign_id.
	want := []string{"path.campaign_id:value_error"}
	for name, try := range map[string]func() error{
		"update": func() error {
			_, _, err := s.UpdateCampaign(ctx, mpA, c.ID, 0, decode[CampaignInput](t, `{"isActive":true}`))
			return err
		},
		"billing contact": func() error {
			_, _, err := s.SetBillingContact(ctx, mpA, c.ID, 0, BillingContactInput{BillingContactID: Opt[string]{Set: true, V: "bc-1"}})
			return err
		},
		"create bid": func() error {
			_, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"keyword","target":"x","bidAmount":1}`))
			return err
		},
		"update bid": func() error {
			_, _, _, err := s.UpdateBid(ctx, mpA, c.ID, b.ID, 0, decode[BidInput](t, `{"bidAmount":2}`))
			return err
		},
		"delete bid": func() error { return s.DeleteBid(ctx, mpA, c.ID, b.ID, 0) },
	} {
		if got := locs(try()); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	// Still readable, with its bids; listed, and filtered by its status.
	if got, v, err := s.GetCampaign(mpA, c.ID); err != nil || v != 2 || !got.Archived() {
		t.Errorf("get: %+v v%d %v", got, v, err)
	}
	if _, bs, _, err := s.ListBids(mpA, c.ID, "", 10); err != nil || len(bs) != 1 {
		t.Errorf("bids: %v %v", bs, err)
	}
	for f, n := range map[string]int{"": 1, StatusArchived: 1, StatusRunning: 0} {
		var fl Filter
		if f != "" {
			fl.Statuses = []string{f}
		}
		if cs, _ := s.ListAll(mpA, fl, "", 10); len(cs) != n {
			t.Errorf("status filter %q: %d campaigns, want %d", f, len(cs), n)
		}
	}
	if cs, _, err := s.ListCampaigns(mpA, "v-1", "", 10); err != nil || len(cs) != 1 {
		t.Errorf("vendor list: %v %v", cs, err)
	}
}

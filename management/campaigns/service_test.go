package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idlist"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/fakes"
	"github.com/endcap/endcap/testkit/testenv"
)

// fakeRefs is an in-memory catalog, billing, segments and marketplaces
// view.
type fakeRefs struct {
	*fakes.Catalog
	mu       sync.Mutex
	contacts map[string][]string // contact -> linked vendors
	segments map[string]bool
	reserves map[string][2]int64 // marketplace -> CPC, CPM reserve
}

func newFakeRefs() *fakeRefs {
	return &fakeRefs{Catalog: fakes.NewCatalog(), contacts: map[string][]string{}, segments: map[string]bool{}, reserves: map[string][2]int64{}}
}

func (f *fakeRefs) Reserve(mp string) (int64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reserves[mp]
	return r[0], r[1]
}

func (f *fakeRefs) Contact(mp, contactID, vendorID string) (bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs, ok := f.contacts[mp+"/"+contactID]
	return ok, contains(vs, vendorID)
}

func (f *fakeRefs) SegmentExists(mp, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.segments[mp+"/"+id]
}

const mpA, mpB = "mp-a", "mp-b"

func TestMain(m *testing.M) { testenv.Main(m) }

// newService runs a Service on a fresh kfake log, with vendor v-1 and v-2,
// products and references in marketplace A.
func newService(t *testing.T) (*Service, *fakeRefs, *time.Time) {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	return newServiceOn(t, brokers)
}

// newServiceOn is newService on the given Kafka: a second call on the same
// brokers is a second process sharing the log.
func newServiceOn(t *testing.T, brokers []string) (*Service, *fakeRefs, *time.Time) {
	t.Helper()
	f := newFakeRefs()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var s *Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "t."}, func(l *statelog.Log) {
		s = New(l, f, f, f, f)
		s.now = func() time.Time { return now }
	})
	f.Vendors[mpA+"/v-1"] = true
	f.Vendors[mpA+"/v-2"] = true
	f.Vendors[mpB+"/v-1"] = true
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-1", Active: true, Vendors: idlist.Of("v-1")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-2", Active: true, Vendors: idlist.Of("v-1", "v-2"), Categories: idlist.Of("c-1"), QualityScore: 0.5})
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-3", Active: false, Vendors: idlist.Of("v-1")})
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-9", Active: true, Vendors: idlist.Of("v-2")})
	f.contacts[mpA+"/bc-1"] = []string{"v-1"}
	f.contacts[mpA+"/bc-2"] = []string{"v-2"}
	f.segments[mpA+"/seg-1"] = true
	return s, f, &now
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// locs renders validation errors as "loc.path:type" strings.
func locs(err error) []string {
	v, ok := validation.As(err)
	if !ok {
		return []string{fmt.Sprint("not a validation error: ", err)}
	}
	var out []string
	for _, e := range v {
		parts := make([]string, len(e.Loc))
		for i, l := range e.Loc {
			parts[i] = fmt.Sprint(l)
		}
		out = append(out, strings.Join(parts, ".")+":"+e.Type)
	}
	sort.Strings(out)
	return out
}

const okCampaign = `"name":"Spring","type":"listings","dailyBudget":10`

func TestCreateCampaignValidation(t *testing.T) {
	s, _, _ := newService(t)
	cases := []struct {
		body string
		want []string
	}{
		{`{}`, []string{"body.name:missing", "body.type:missing"}},
		{`{"name":"  ","type":"video","dailyBudget":1}`, []string{"body.name:string_too_short", "body.type:enum"}},
		{`{"name":"` + strings.Repeat("é", 256) + `","type":"listings","dailyBudget":1}`, []string{"body.name:string_too_long"}},
		{`{"name":null,"type":null}`, []string{"body.name:string_type", "body.type:enum"}},
		{`{"name":"a","type":"listings"}`, []string{"body.dailyBudget:missing"}},
		{`{"name":"a","type":"automated","totalBudget":10}`, []string{"body.dailyBudget:missing"}},
		{`{"name":"a","type":"listings","dailyBudget":0,"totalBudget":-1}`, []string{"body.dailyBudget:greater_than", "body.totalBudget:greater_than"}},
		{`{"name":"a","type":"listings","dailyBudget":"5"}`, []string{"body.dailyBudget:decimal_type"}},
		{`{"name":"a","type":"listings","dailyBudget":1.0000001}`, []string{"body.dailyBudget:decimal_max_places"}},
		{`{"name":"a","type":"listings","dailyBudget":20,"totalBudget":10}`, []string{"body.dailyBudget:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"maxBid":1}`, []string{"body.maxBid:value_error"}},
		// The budget of a period ({type, amount}).
		{`{"name":"a","type":"listings","budget":{"type":"yearly","amount":1}}`, []string{"body.budget.type:enum"}},
		{`{"name":"a","type":"listings","budget":{"type":null,"amount":1}}`, []string{"body.budget.type:enum"}},
		{`{"name":"a","type":"listings","budget":{"amount":1}}`, []string{"body.budget.type:missing"}},
		{`{"name":"a","type":"listings","budget":{"type":"weekly"}}`, []string{"body.budget.amount:missing"}},
		{`{"name":"a","type":"listings","budget":{"type":"weekly","amount":null}}`, []string{"body.budget.amount:decimal_type"}},
		{`{"name":"a","type":"listings","budget":{"type":"weekly","amount":0}}`, []string{"body.budget.amount:greater_than"}},
		{`{"name":"a","type":"listings","budget":{"type":"monthly","amount":"5"}}`, []string{"body.budget.amount:decimal_type"}},
		{`{"name":"a","type":"listings","budget":{"type":"monthly","amount":1.0000001}}`, []string{"body.budget.amount:decimal_max_places"}},
		{`{"name":"a","type":"listings","budget":{"type":"weekly","amount":20},"totalBudget":10}`, []string{"body.budget.amount:value_error"}},
		{`{"name":"a","type":"listings","budget":{"type":"daily","amount":20},"totalBudget":10}`, []string{"body.dailyBudget:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"budget":{"type":"weekly","amount":7}}`, []string{"body.budget:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"budget":{"type":"daily","amount":2}}`, []string{"body.budget:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"budget":null}`, []string{"body.budget:value_error"}},
		{`{"name":"a","type":"listings","budget":null}`, []string{"body.dailyBudget:missing"}},
		{`{"name":"a","type":"automated","budget":{"type":"weekly","amount":7}}`, []string{"body.dailyBudget:missing"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"chargeType":"CPA"}`, []string{"body.chargeType:enum"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"startDate":"2026-03-01"}`, []string{"body.startDate:datetime_parsing"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"startDate":"2026-03-02T00:00:00Z","endDate":"2026-03-02T00:00:00Z"}`, []string{"body.endDate:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"endDate":"2026-02-01T00:00:00+01:00"}`, []string{"body.endDate:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"vendorId":"v-2"}`, []string{"body.vendorId:value_error"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"isActive":null}`, []string{"body.isActive:bool_type"}},
		{`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"placementIds":[0,1,9],"devices":["tv"],"locations":["85283473fffffff","nope"],"segments":["seg-1","seg-x",""]}}`,
			[]string{"body.targeting.devices.0:enum", "body.targeting.locations.1:value_error", "body.targeting.placementIds.0:greater_than_equal",
				"body.targeting.placementIds.2:less_than_equal", "body.targeting.segments.1:not_found", "body.targeting.segments.2:string_too_short"}},
	}
	for _, c := range cases {
		_, _, err := s.CreateCampaign(t.Context(), mpA, "v-1", decode[CampaignInput](t, c.body))
		if got := locs(err); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.body, got, c.want)
		}
	}
	if _, _, err := s.CreateCampaign(t.Context(), mpA, "v-404", decode[CampaignInput](t, `{`+okCampaign+`}`)); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("unknown vendor: %v", err)
	}
	if _, _, err := s.CreateCampaign(t.Context(), mpB, "v-2", decode[CampaignInput](t, `{`+okCampaign+`}`)); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("vendor of another marketplace: %v", err)
	}
}

func TestCampaignLifecycle(t *testing.T) {
	s, _, now := newService(t)
	ctx := t.Context()
	c, v, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{"name":" Spring ","type":"listings","chargeType":"cpm","dailyBudget":10.5,"totalBudget":100,
		"startDate":"2026-03-02T00:00:00+01:00","targeting":{"placementIds":[3,1,3],"devices":["mobile","desktop","mobile"],"locations":["85283473FFFFFFF"],"segments":["seg-1"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v != 1 || c.Name != "Spring" || c.ChargeType != ChargeCPM || c.DailyBudgetMicros != 10_500_000 || c.TotalBudgetMicros != 100_000_000 || !c.Active {
		t.Errorf("created %+v v%d", c, v)
	}
	if !c.StartDate.Equal(time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)) || c.StartDate.Location() != time.UTC {
		t.Errorf("start %v", c.StartDate)
	}
	wantT := Targeting{PlacementIDs: []int{1, 3}, Devices: []string{"desktop", "mobile"}, Locations: []string{"85283473fffffff"}, Segments: []string{"seg-1"}}
	if !reflect.DeepEqual(c.Targeting, wantT) {
		t.Errorf("targeting %+v", c.Targeting)
	}
	j := s.JSON(c)
	if j.Status != StatusScheduled || j.MaxBid != nil || j.EndDate != nil || j.BillingContactID != nil {
		t.Errorf("json %+v", j)
	}
	got, gv, err := s.GetCampaign(mpA, c.ID)
	if err != nil || gv != 1 || got.ID != c.ID {
		t.Fatalf("get: %v %d", err, gv)
	}
	if _, _, err := s.GetCampaign(mpB, c.ID); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("other marketplace sees the campaign: %v", err)
	}

	// Status follows the clock and the flag.
	*now = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if st := s.JSON(c).Status; st != StatusRunning {
		t.Errorf("status %s", st)
	}
	// Targeting merges like the campaign: absent lists stay, null/[] clear.
	cm, _, err := s.UpdateCampaign(ctx, mpA, c.ID, 1, decode[CampaignInput](t, `{"targeting":{"devices":["desktop"],"placementIds":null,"segments":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Targeting{Devices: []string{"desktop"}, Locations: []string{"85283473fffffff"}}); !reflect.DeepEqual(cm.Targeting, want) {
		t.Errorf("merged targeting %+v", cm.Targeting)
	}
	c2, v2, err := s.UpdateCampaign(ctx, mpA, c.ID, 2, decode[CampaignInput](t, `{"isActive":false,"endDate":"2026-04-01T00:00:00Z","totalBudget":null,"targeting":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if v2 != 3 || c2.Active || c2.TotalBudgetMicros != 0 || c2.EndDate == nil || !reflect.DeepEqual(c2.Targeting, Targeting{}) || c2.Name != "Spring" || !c2.UpdatedAt.Equal(*now) {
		t.Errorf("updated %+v v%d", c2, v2)
	}
	if st := s.JSON(c2).Status; st != StatusPaused {
		t.Errorf("status %s", st)
	}
	*now = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if st := s.JSON(c2).Status; st != StatusEnded {
		t.Errorf("status %s", st)
	}
	// A stale If-Match is a conflict; a no-op writes nothing.
	if _, _, err := s.UpdateCampaign(ctx, mpA, c.ID, 2, decode[CampaignInput](t, `{"name":"x"}`)); !errors.Is(err, statelog.ErrConflict) {
		t.Errorf("stale if-match: %v", err)
	}
	if _, v3, err := s.UpdateCampaign(ctx, mpA, c.ID, 0, decode[CampaignInput](t, `{"name":"Spring","type":"listings","isActive":false}`)); err != nil || v3 != 3 {
		t.Errorf("no-op: %v v%d", err, v3)
	}
	// Rules on the merged campaign.
	for body, want := range map[string][]string{
		`{"type":"banners"}`:                     {"body.type:value_error"},
		`{"dailyBudget":null}`:                   {"body.dailyBudget:missing"},
		`{"dailyBudget":1000,"totalBudget":999}`: {"body.dailyBudget:value_error"},
		`{"startDate":"2026-05-01T00:00:00Z"}`:   {"body.endDate:value_error"},
		`{"startDate":null}`:                     {"body.startDate:datetime_type"},
		`{"vendorId":"v-2"}`:                     {"body.vendorId:value_error"},
	} {
		_, _, err := s.UpdateCampaign(ctx, mpA, c.ID, 0, decode[CampaignInput](t, body))
		if got := locs(err); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v want %v", body, got, want)
		}
	}
	if _, _, err := s.UpdateCampaign(ctx, mpB, c.ID, 0, decode[CampaignInput](t, `{"name":"x"}`)); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("update from another marketplace: %v", err)
	}

	// Billing contact.
	for body, want := range map[string][]string{
		`{}`:                          {"body.billingContactId:missing"},
		`{"billingContactId":""}`:     {"body.billingContactId:string_too_short"},
		`{"billingContactId":"bc-x"}`: {"body.billingContactId:not_found"},
		`{"billingContactId":"bc-2"}`: {"body.billingContactId:value_error"},
	} {
		_, _, err := s.SetBillingContact(ctx, mpA, c.ID, 0, decode[BillingContactInput](t, body))
		if got := locs(err); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v want %v", body, got, want)
		}
	}
	c4, v4, err := s.SetBillingContact(ctx, mpA, c.ID, 3, decode[BillingContactInput](t, `{"billingContactId":"bc-1"}`))
	if err != nil || v4 != 4 || c4.BillingContactID != "bc-1" || *s.JSON(c4).BillingContactID != "bc-1" {
		t.Errorf("billing contact: %v v%d %+v", err, v4, c4)
	}

	// Lists by vendor, paged in creation order.
	var ids []string
	ids = append(ids, c.ID)
	for i := 0; i < 4; i++ {
		x, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
	}
	if _, _, err := s.CreateCampaign(ctx, mpA, "v-2", decode[CampaignInput](t, `{`+okCampaign+`}`)); err != nil {
		t.Fatal(err)
	}
	var seen []string
	after := ""
	for {
		page, more, err := s.ListCampaigns(mpA, "v-1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			seen = append(seen, x.ID)
		}
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(seen, ids) {
		t.Errorf("list %v, want %v", seen, ids)
	}
	if l, more, err := s.ListCampaigns(mpB, "v-1", "", 10); err != nil || len(l) != 0 || more {
		t.Errorf("other marketplace: %v %v %v", l, more, err)
	}
	if _, _, err := s.ListCampaigns(mpA, "v-404", "", 10); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("unknown vendor: %v", err)
	}
	n := 0
	s.EachCampaign(mpA, func(Campaign) bool { n++; return true })
	if n != 6 {
		t.Errorf("EachCampaign: %d", n)
	}
}

func TestConcurrentUpdatesOneWins(t *testing.T) {
	s, _, _ := newService(t)
	c, _, err := s.CreateCampaign(t.Context(), mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, _, err := s.UpdateCampaign(context.Background(), mpA, c.ID, 1, decode[CampaignInput](t, fmt.Sprintf(`{"name":"n%d"}`, i)))
			errs <- err
		}()
	}
	ok := 0
	for i := 0; i < n; i++ {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, statelog.ErrConflict):
			t.Errorf("unexpected %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d updates succeeded, want 1", ok)
	}
}

func TestBids(t *testing.T) {
	s, f, _ := newService(t)
	ctx := t.Context()
	c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string][]string{
		`{}`: {"body.bidAmount:missing", "body.target:missing", "body.targetType:missing"},
		`{"targetType":"brand","target":"x","bidAmount":1}`:                                  {"body.targetType:enum"},
		`{"targetType":"product","target":"p-404","bidAmount":1}`:                            {"body.target:not_found"},
		`{"targetType":"product","target":"p-9","bidAmount":1}`:                              {"body.target:value_error"},
		`{"targetType":"product","target":"p-1","bidAmount":0}`:                              {"body.bidAmount:greater_than"},
		`{"targetType":"keyword","target":"   ","bidAmount":1}`:                              {"body.target:string_too_short"},
		`{"targetType":"keyword","target":"` + strings.Repeat("a", 101) + `","bidAmount":1}`: {"body.target:string_too_long"},
		`{"targetType":"category","target":"","bidAmount":1}`:                                {"body.target:string_too_short"},
		`{"targetType":"category","target":"c","bidAmount":null,"isActive":null}`:            {"body.bidAmount:decimal_type", "body.isActive:bool_type"},
	} {
		_, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, body))
		if got := locs(err); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v want %v", body, got, want)
		}
	}
	_, pb, v, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"product","target":" p-1 ","bidAmount":0.25}`))
	if err != nil || v != 1 || pb.Target != "p-1" || pb.AmountMicros != 250_000 || !pb.Active {
		t.Fatalf("product bid %+v %v", pb, err)
	}
	_, kb, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"keyword","target":"  Running   SHOES ","bidAmount":1,"isActive":false}`))
	if err != nil || kb.Target != "running shoes" || kb.Active {
		t.Fatalf("keyword bid %+v %v", kb, err)
	}
	_, cb, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"category","target":"c-1","bidAmount":2}`))
	if err != nil {
		t.Fatal(err)
	}
	// One bid per target; the same target in another campaign is fine.
	if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"keyword","target":"running shoes","bidAmount":3}`)); !reflect.DeepEqual(locs(err), []string{"body.target:value_error"}) {
		t.Errorf("duplicate: %v", err)
	}
	if _, _, _, err := s.CreateBid(ctx, mpA, other.ID, decode[BidInput](t, `{"targetType":"keyword","target":"running shoes","bidAmount":3}`)); err != nil {
		t.Errorf("same target, other campaign: %v", err)
	}
	_, bids, more, err := s.ListBids(mpA, c.ID, "", 2)
	if err != nil || !more || len(bids) != 2 || bids[0].ID != pb.ID || bids[1].ID != kb.ID {
		t.Fatalf("page 1: %v %v %+v", err, more, bids)
	}
	_, bids, more, _ = s.ListBids(mpA, c.ID, bids[1].ID, 2)
	if more || len(bids) != 1 || bids[0].ID != cb.ID {
		t.Fatalf("page 2: %v %+v", more, bids)
	}

	// Eligibility is computed at read time from the catalog.
	if j := s.BidJSON(mpA, c, pb); !j.IsEligible || j.IneligibleReason != nil || j.IneligibleMessage != nil {
		t.Errorf("eligible: %+v", j)
	}
	// The marketplace's reserve price counts: 0.25 is below a CPC reserve
	// of 0.30, and live bids follow.
	f.reserves[mpA] = [2]int64{300_000, 0}
	if j := s.BidJSON(mpA, c, pb); j.IsEligible || *j.IneligibleReason != ReasonBelowReserve ||
		*j.IneligibleMessage != "the bid 0.25 is below the marketplace's CPC reserve price 0.3" {
		t.Errorf("below reserve: %+v", j)
	}
	if live := s.LiveBids(mpA, c); len(live) != 1 || live[0].BidID != cb.ID {
		t.Errorf("live bids below the reserve %+v", live)
	}
	f.reserves[mpA] = [2]int64{}
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-1", Active: false, Vendors: idlist.Of("v-1")})
	if j := s.BidJSON(mpA, c, pb); j.IsEligible || *j.IneligibleReason != ReasonProductInactive {
		t.Errorf("inactive: %+v", j)
	}
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-1", Active: true, Vendors: idlist.Of("v-2")})
	if j := s.BidJSON(mpA, c, pb); j.IsEligible || *j.IneligibleReason != ReasonVendorNotPermitted {
		t.Errorf("vendor removed: %+v", j)
	}
	f.DeleteProduct(mpA, "p-1")
	if j := s.BidJSON(mpA, c, pb); j.IsEligible || *j.IneligibleReason != ReasonProductNotFound {
		t.Errorf("deleted: %+v", j)
	}
	live := s.LiveBids(mpA, c)
	if len(live) != 1 || live[0].BidID != cb.ID || live[0].AmountMicros != 2_000_000 {
		t.Errorf("live bids %+v", live)
	}

	// Update and delete.
	for body, want := range map[string][]string{
		`{"targetType":"product"}`: {"body.targetType:value_error"},
		`{"target":"other"}`:       {"body.target:value_error"},
		`{"bidAmount":0.0000001}`:  {"body.bidAmount:decimal_max_places"},
		`{"bidAmount":null}`:       {"body.bidAmount:decimal_type"},
	} {
		_, _, _, err := s.UpdateBid(ctx, mpA, c.ID, kb.ID, 0, decode[BidInput](t, body))
		if got := locs(err); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v want %v", body, got, want)
		}
	}
	_, kb2, v, err := s.UpdateBid(ctx, mpA, c.ID, kb.ID, 1, decode[BidInput](t, `{"target":"RUNNING shoes","targetType":"keyword","bidAmount":1.5,"isActive":true}`))
	if err != nil || v != 2 || kb2.AmountMicros != 1_500_000 || !kb2.Active {
		t.Errorf("update: %v v%d %+v", err, v, kb2)
	}
	if _, _, _, err := s.UpdateBid(ctx, mpA, c.ID, kb.ID, 1, decode[BidInput](t, `{"bidAmount":2}`)); !errors.Is(err, statelog.ErrConflict) {
		t.Errorf("stale: %v", err)
	}
	if _, _, _, err := s.GetBid(mpA, other.ID, kb.ID); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("bid through another campaign: %v", err)
	}
	if err := s.DeleteBid(ctx, mpA, other.ID, kb.ID, 0); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("delete through another campaign: %v", err)
	}
	if _, _, _, err := s.GetBid(mpB, c.ID, kb.ID); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("other marketplace: %v", err)
	}
	if err := s.DeleteBid(ctx, mpA, c.ID, kb.ID, 1); !errors.Is(err, statelog.ErrConflict) {
		t.Errorf("stale delete: %v", err)
	}
	if err := s.DeleteBid(ctx, mpA, c.ID, kb.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.GetBid(mpA, c.ID, kb.ID); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("deleted bid: %v", err)
	}
	// Its target is free again.
	if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"keyword","target":"running shoes","bidAmount":3}`)); err != nil {
		t.Errorf("re-create after delete: %v", err)
	}
	if got := len(s.BidsOf(mpA, c.ID)); got != 3 {
		t.Errorf("BidsOf: %d", got)
	}
}

func TestAutomatedBidAmount(t *testing.T) {
	cases := []struct {
		daily, maxBid int64
		qs            float64
		want          int64
	}{
		{100_000_000, 0, 0, 2_000_000},         // 100 × 2% = 2
		{100_000_000, 0, 0.5, 1_000_000},       // × 0.5
		{100_000_000, 1_500_000, 0, 1_500_000}, // capped by maxBid
		{12_345_678, 0, 0, 240_000},            // 0.24691356 rounded down to 0.24
		{1_000_000, 0, 0, 20_000},              // 0.02
		{100_000, 0, 0, 10_000},                // 0.002 → floor 0.01
		{100_000, 5_000, 0, 5_000},             // maxBid below the floor wins
		{100_000_000, 0, 0.333333, 660_000},    // 0.666666 → 0.66
		{100_000_000, 0, 1.5, 2_000_000},       // out-of-range score ignored
		{1_000_000_000_000_000, 0, 1, 20_000_000_000_000},
	}
	for _, c := range cases {
		got := AutomatedBidMicros(Campaign{DailyBudgetMicros: c.daily, MaxBidMicros: c.maxBid}, c.qs)
		if got != c.want {
			t.Errorf("daily %d max %d qs %v: %d, want %d", c.daily, c.maxBid, c.qs, got, c.want)
		}
	}
}

func TestAutomatedBids(t *testing.T) {
	s, f, _ := newService(t)
	ctx := t.Context()
	c, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{"name":"auto","type":"automated","dailyBudget":50,"maxBid":0.8}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.CreateBid(ctx, mpA, c.ID, decode[BidInput](t, `{"targetType":"category","target":"c","bidAmount":1}`)); !reflect.DeepEqual(locs(err), []string{"path.campaign_id:value_error"}) {
		t.Errorf("manual bid on automated campaign: %v", err)
	}
	page, more, err := s.AutomatedBids(mpA, c.ID, "", 2)
	want := []AutoBidJSON{{"p-1", 800_000, true}, {"p-2", 500_000, true}}
	if err != nil || !more || !reflect.DeepEqual(page, want) {
		t.Fatalf("page 1: %v %v %+v", err, more, page)
	}
	page, more, _ = s.AutomatedBids(mpA, c.ID, "p-2", 2)
	if more || !reflect.DeepEqual(page, []AutoBidJSON{{"p-3", 800_000, false}}) {
		t.Fatalf("page 2: %v %+v", more, page)
	}
	// The catalog is read at request time.
	f.SetProduct(mpA, entityref.ProductRef{ID: "p-0", Active: true, Vendors: idlist.Of("v-1"), QualityScore: 0.1})
	f.DeleteProduct(mpA, "p-2")
	page, _, _ = s.AutomatedBids(mpA, c.ID, "", 100)
	if !reflect.DeepEqual(page, []AutoBidJSON{{"p-0", 100_000, true}, {"p-1", 800_000, true}, {"p-3", 800_000, false}}) {
		t.Errorf("after catalog changes: %+v", page)
	}
	if live := s.LiveBids(mpA, c); len(live) != 2 || live[0].Target != "p-0" || live[1].Target != "p-1" {
		t.Errorf("live: %+v", live)
	}
	manual, _, _ := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if _, _, err := s.AutomatedBids(mpA, manual.ID, "", 10); !reflect.DeepEqual(locs(err), []string{"path.campaign-id:value_error"}) {
		t.Errorf("not automated: %v", err)
	}
	if _, _, err := s.AutomatedBids(mpB, c.ID, "", 10); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("other marketplace: %v", err)
	}
}

// TestOneBidPerTargetAcrossProcesses: two processes creating a bid on the
// same target of one campaign at once: exactly one succeeds, the others
// fail with a conflict or a validation error, in every view.
func TestOneBidPerTargetAcrossProcesses(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	s1, _, _ := newServiceOn(t, brokers)
	s2, _, _ := newServiceOn(t, brokers)
	c, _, err := s1.CreateCampaign(t.Context(), mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`}`))
	if err != nil {
		t.Fatal(err)
	}
	testenvEventually(t, func() bool { _, _, ok := s2.Campaign(mpA, c.ID); return ok })
	for round := 0; round < 5; round++ {
		body := fmt.Sprintf(`{"targetType":"keyword","target":"kw %d","bidAmount":1}`, round)
		const n = 6
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			svc := s1
			if i%2 == 1 {
				svc = s2
			}
			go func() {
				_, _, _, err := svc.CreateBid(context.Background(), mpA, c.ID, decode[BidInput](t, body))
				errs <- err
			}()
		}
		ok := 0
		for i := 0; i < n; i++ {
			err := <-errs
			_, invalid := validation.As(err)
			switch {
			case err == nil:
				ok++
			case !invalid && !errors.Is(err, statelog.ErrConflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d creations succeeded, want 1", round, ok)
		}
	}
	for _, s := range []*Service{s1, s2} {
		testenvEventually(t, func() bool { return len(s.BidsOf(mpA, c.ID)) == 5 })
	}
}

func testenvEventually(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, func() error {
		if !cond() {
			return errors.New("condition not met")
		}
		return nil
	})
}

// TestVendorByUUID: a campaign's vendor may be named by its catalog id or by
// its internal UUID, on create, in the list and in a body's vendorId; the
// campaign keeps the catalog id.
func TestVendorByUUID(t *testing.T) {
	s, _, _ := newService(t)
	ctx := t.Context()
	u1, u2 := vendorid.String(mpA, "v-1"), vendorid.String(mpA, "v-2")
	c, _, err := s.CreateCampaign(ctx, mpA, u1, decode[CampaignInput](t, `{`+okCampaign+`,"vendorId":"`+u1+`"}`))
	if err != nil || c.VendorID != "v-1" {
		t.Fatalf("created %+v %v", c, err)
	}
	if _, _, err := s.CreateCampaign(ctx, mpA, "v-1", decode[CampaignInput](t, `{`+okCampaign+`,"vendorId":"`+u1+`"}`)); err != nil {
		t.Fatalf("catalog id in the path, UUID in the body: %v", err)
	}
	_, _, err = s.CreateCampaign(ctx, mpA, u1, decode[CampaignInput](t, `{`+okCampaign+`,"vendorId":"`+u2+`"}`))
	if got := locs(err); !reflect.DeepEqual(got, []string{"body.vendorId:value_error"}) {
		t.Fatalf("another vendor's UUID in the body: %v", got)
	}
	for _, id := range []string{"v-1", u1} {
		cs, more, err := s.ListCampaigns(mpA, id, "", 10)
		if err != nil || more || len(cs) != 2 {
			t.Fatalf("ListCampaigns(%s) = %d %v %v", id, len(cs), more, err)
		}
		if got, err := s.VendorID(mpA, id); got != "v-1" || err != nil {
			t.Fatalf("VendorID(%s) = %s %v", id, got, err)
		}
		// The marketplace's list filters by either id, with one cursor scope.
		f := s.Resolve(mpA, Filter{VendorID: id})
		if cs, more := s.ListAll(mpA, f, "", 10); f.VendorID != "v-1" || more || len(cs) != 2 ||
			f.Scope() != (Filter{VendorID: "v-1"}).Scope() {
			t.Fatalf("ListAll(vendor_id=%s) = %d campaigns (filter %+v)", id, len(cs), f)
		}
	}
	// Another marketplace's UUID of the same catalog id, or the UUID of no
	// vendor: 404.
	for _, id := range []string{vendorid.String(mpB, "v-1"), vendorid.String(mpA, "v-9")} {
		if _, _, err := s.CreateCampaign(ctx, mpA, id, decode[CampaignInput](t, `{`+okCampaign+`}`)); !errors.Is(err, validation.ErrNotFound) {
			t.Fatalf("CreateCampaign(%s): %v", id, err)
		}
		if _, _, err := s.ListCampaigns(mpA, id, "", 10); !errors.Is(err, validation.ErrNotFound) {
			t.Fatalf("ListCampaigns(%s): %v", id, err)
		}
		if cs, _ := s.ListAll(mpA, s.Resolve(mpA, Filter{VendorID: id}), "", 10); len(cs) != 0 {
			t.Fatalf("ListAll(vendor_id=%s) = %d campaigns", id, len(cs))
		}
	}
}

// TestImportIDs: imported campaigns and bids have UUID ids in canonical
// form, as the API's (which reads no other in its paths).
func TestImportIDs(t *testing.T) {
	s, _, _ := newService(t)
	ctx := t.Context()
	id := uuid.NewString()
	c := Campaign{ID: id, VendorID: "v-1", Type: TypeListings, ChargeType: ChargeCPC, Active: true}
	for _, bad := range []string{"c-1", strings.ToUpper(id), "{" + id + "}"} {
		c.ID = bad
		if err := s.Import(ctx, mpA, []Campaign{c}, nil); err == nil {
			t.Errorf("campaign id %q imported", bad)
		}
	}
	c.ID = id
	b := Bid{ID: "b-1", CampaignID: id, TargetType: TargetProduct, Target: "p-1", AmountMicros: 1, Active: true}
	if err := s.Import(ctx, mpA, []Campaign{c}, []Bid{b}); err == nil {
		t.Error("bid id b-1 imported")
	}
	b.ID = uuid.NewString()
	if err := s.Import(ctx, mpA, []Campaign{c}, []Bid{b}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetCampaign(mpA, id); err != nil {
		t.Fatal(err)
	}
}

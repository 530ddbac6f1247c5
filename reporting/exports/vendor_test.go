package exports

import (
	"errors"
	"io"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/pagination"
)

// A vendor's export holds the rows of that vendor's campaigns only (the
// rollup's vendor_id is the catalog id), is listed and opened for that
// vendor only, and counts against the vendor's own quota.
func TestVendorExports(t *testing.T) {
	st := newStack(t)
	st.opts.VendorDailyQuota = 2
	st.svc.o.VendorDailyQuota = 2
	st.workers(t, WorkerOptions{Workers: 1})
	mp := uuid.NewString()
	day := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	st.insert(t,
		rollupRow{mp: mp, day: day, campaign: "c1", sponsored: 1, imps: 10, clicks: 1},
		rollupRow{mp: mp, day: day, campaign: "c2", sponsored: 1, imps: 20, clicks: 2, vendor: "v2"},
		rollupRow{mp: mp, day: day, campaign: "c3", sponsored: 1, imps: 30, clicks: 3, vendor: "v2"},
		// Another vendor whose catalog id begins like v2's.
		rollupRow{mp: mp, day: day, campaign: "c4", sponsored: 1, imps: 40, clicks: 4, vendor: "v22"},
	)
	req := Request{Dataset: DatasetMonitoringMetrics, Dimensions: []string{"vendor_id", "campaign_id"}, Metrics: []string{"impressions", "clicks"},
		Granularity: GranularityDayLocal, StartDate: day, EndDate: day}
	all, err := st.svc.Create(st.ctx, mp, req)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := st.svc.CreateForVendor(st.ctx, mp, "v2", req)
	if err != nil {
		t.Fatal(err)
	}
	if v2.VendorID != "v2" {
		t.Fatalf("vendor export %+v", v2)
	}
	read := func(vendor, id string) [][]string {
		t.Helper()
		f, err := st.svc.Open(st.ctx, mp, vendor, id)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Body.Close()
		b, err := io.ReadAll(f.Body)
		if err != nil || int64(len(b)) != f.Size {
			t.Fatalf("read %d of %d bytes: %v", len(b), f.Size, err)
		}
		_, rows, err := ReadFile(FormatCSV, b)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	for _, id := range []string{all.ID, v2.ID} {
		if v := st.waitDone(t, mp, id); v.Status != StatusCompleted {
			t.Fatalf("export %s: %+v", id, v)
		}
	}
	if got, want := read("", v2.ID), [][]string{{"v2", "c2", "20", "2"}, {"v2", "c3", "30", "3"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("vendor rows %q, want %q", got, want)
	}
	if got, want := read("v2", v2.ID), [][]string{{"v2", "c2", "20", "2"}, {"v2", "c3", "30", "3"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("vendor rows read by the vendor %q, want %q", got, want)
	}
	if got := read("", all.ID); len(got) != 4 {
		t.Errorf("marketplace rows %q", got)
	}
	// What a vendor cannot open: the marketplace's export, another
	// vendor's, an unknown id.
	for _, tc := range []struct{ vendor, id string }{{"v2", all.ID}, {"v1", v2.ID}, {"v22", v2.ID}, {"v2", uuid.NewString()}} {
		if _, err := st.svc.Open(st.ctx, mp, tc.vendor, tc.id); !errors.Is(err, ErrNotFound) {
			t.Errorf("vendor %s opens %s: %v, want not found", tc.vendor, tc.id, err)
		}
	}
	// The lists: a vendor's holds its exports only; a cursor of one list
	// is refused by another.
	signer := pagination.NewSigner([]byte("a test key of the cursors, long enough"))
	list := func(vendor string, q url.Values) ([]string, Page) {
		t.Helper()
		lq, probs := ParseVendorListQuery(q, mp, vendor, signer)
		if len(probs) > 0 {
			t.Fatalf("list %v: %+v", q, probs)
		}
		p, err := st.svc.List(st.ctx, mp, lq)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range p.Exports {
			ids = append(ids, e.ExportID+"/"+e.VendorID)
		}
		return ids, p
	}
	if ids, _ := list("v2", nil); !reflect.DeepEqual(ids, []string{v2.ID + "/v2"}) {
		t.Errorf("v2's list %q", ids)
	}
	if ids, _ := list("v1", nil); len(ids) != 0 {
		t.Errorf("v1's list %q", ids)
	}
	if ids, _ := list("", nil); len(ids) != 2 {
		t.Errorf("the marketplace's list %q", ids)
	}
	_, p := list("", url.Values{"limit": {"1"}})
	next := ListQuery{Limit: 1}.NextPage(signer, mp, p.Last)
	if _, probs := ParseVendorListQuery(url.Values{"limit": {"1"}, "next_page": {next}}, mp, "v2", signer); len(probs) != 1 || probs[0].Code != CodeInvalidCursor {
		t.Errorf("the marketplace list's cursor in a vendor's list: %+v", probs)
	}
	// The vendor's quota is its own: v2 has 2 a day, the marketplace's
	// are untouched.
	if _, err := st.svc.CreateForVendor(st.ctx, mp, "v2", req); err != nil {
		t.Fatal(err)
	}
	if _, err := st.svc.CreateForVendor(st.ctx, mp, "v2", req); !errors.Is(err, ErrVendorQuota) {
		t.Errorf("third export of v2: %v, want the vendor quota", err)
	}
	if _, err := st.svc.CreateForVendor(st.ctx, mp, "v22", req); err != nil {
		t.Errorf("v22's first export: %v", err)
	}
	if _, err := st.svc.Create(st.ctx, mp, req); err != nil {
		t.Errorf("the marketplace's export after the vendors': %v", err)
	}
	// Not completed yet: no file.
	pending, err := st.svc.CreateForVendor(st.ctx, mp, "v3", Request{Dataset: DatasetMonitoringMetrics, Dimensions: []string{"campaign_id"},
		Metrics: []string{"clicks"}, Granularity: GranularityDayLocal, StartDate: day, EndDate: day})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.svc.Open(st.ctx, mp, "v3", pending.ID); err != nil && !errors.Is(err, ErrNotReady) {
		t.Errorf("a pending export's file: %v", err)
	}
}

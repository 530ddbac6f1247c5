package scoredfiles

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A vendor's download of a day is the stored file's rows whose vendor_id
// is the vendor's, in the file's order, with the file's metadata; the
// marketplace's download is the stored object byte for byte.
func TestCopyVendor(t *testing.T) {
	f := newFixture(t)
	mp := uuid.NewString()
	day := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	vendors := []string{"vend-1", "vend-2", "vend-22", "vend-2"}
	var items []item
	for i := range 60 {
		items = append(items, item{mp: mp, event: fmt.Sprintf("pur-%03d", i), at: day.Add(time.Duration(i) * time.Minute), day: "2026-03-07",
			user: "u", unitMicros: int64(1_000_000 + i), qty: 1, attributed: 1, reason: "click_same_product", score: 1, version: 1, vendor: vendors[i%len(vendors)]})
	}
	f.insert(t, items)
	f.svc.RowGroupRows = 7 // several row groups
	if _, err := f.svc.Produce(f.ctx, Marketplace{ID: mp}, day); err != nil {
		t.Fatal(err)
	}
	all, kv := f.read(t, mp, day)
	if len(all) != 60 {
		t.Fatalf("%d rows", len(all))
	}
	defer func(b, n int) { rangeBlock, rangeBlocks = b, n }(rangeBlock, rangeBlocks)
	rangeBlock, rangeBlocks = 1024, 4 // blocks evicted while the columns are read
	st, ok, err := f.svc.Stored(f.ctx, mp, day)
	if err != nil || !ok {
		t.Fatalf("stored: %v %v", ok, err)
	}
	for _, vendor := range []string{"vend-2", "vend-1", "vend-22", "vend-9", "VEND-2", "vend"} {
		t.Run(vendor, func(t *testing.T) {
			var want []Record
			for _, r := range all {
				if r.VendorID == vendor {
					want = append(want, r)
				}
			}
			var buf bytes.Buffer
			n, err := f.svc.CopyVendor(f.ctx, st, vendor, &buf)
			if err != nil {
				t.Fatal(err)
			}
			got, gkv := decode(t, buf.Bytes())
			if n != int64(len(want)) || len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("%d rows written, %d read, want %d", n, len(got), len(want))
			}
			for k, v := range kv {
				if gkv[k] != v {
					t.Errorf("metadata %s = %q, want %q", k, gkv[k], v)
				}
			}
			if gkv["endcap.vendor_id"] != vendor {
				t.Errorf("endcap.vendor_id = %q", gkv["endcap.vendor_id"])
			}
		})
	}
	var whole bytes.Buffer
	body, err := f.svc.Open(f.ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	_, err = whole.ReadFrom(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := decode(t, whole.Bytes()); !reflect.DeepEqual(got, all) || int64(whole.Len()) != st.Size() {
		t.Errorf("the whole file: %d bytes, %d rows", whole.Len(), len(got))
	}
	// The day produced again after it was described: the old description
	// no longer reads (no mix of two files).
	if _, err := f.svc.Produce(f.ctx, Marketplace{ID: mp}, day); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Open(f.ctx, st); !errors.Is(err, errReplaced) {
		t.Errorf("open of a replaced file: %v", err)
	}
	if _, err := f.svc.CopyVendor(f.ctx, st, "vend-2", &bytes.Buffer{}); !errors.Is(err, errReplaced) {
		t.Errorf("vendor copy of a replaced file: %v", err)
	}
	if _, ok, err := f.svc.Stored(f.ctx, mp, day.AddDate(0, 0, 1)); ok || err != nil {
		t.Errorf("a day without a file: %v %v", ok, err)
	}
}

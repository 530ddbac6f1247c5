package catalog_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestSearchAll: without a vendor, the search finds the products whose id
// or name contains the text, case-insensitively, whether the name is kept
// in memory (short) or on disk (long), the product whose id is the text
// first, then by id, at most the limit (and says more match); a deleted
// product is not found; a search past its deadline is an error of the
// unavailable kind.
func TestSearchAll(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	texts := testenv.SpillStore(t)
	var svc *catalog.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{}, func(l *statelog.Log) { svc = catalog.New(l, texts) })
	const mp = "mp-s"
	long := func(id, name string) catalog.ProductInput {
		p := product(id, "v-1")
		p.Name, p.Description = ptr(name), ptr(strings.Repeat("A description long enough to go to disk. ", 3))
		return p
	}
	short := func(id, name string) catalog.ProductInput { p := product(id, "v-2"); p.Name = ptr(name); return p }
	upsert(t, svc, mp,
		long("p-1", "Alpha TRAIL shoe"), long("p-2", "Beta winter boot"), short("p-3", "trail socks"), short("p-4", "Crème brûlée torch"),
		short("trail", "A product whose id is the text"), long("p-5", "Gone trail thing"), short("p-6", "Shoe trail"))
	upsert(t, svc, "mp-other", short("p-9", "trail of another marketplace"))
	if _, err := svc.DeleteProducts(t.Context(), mp, []string{"p-5"}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q     string
		limit int
		want  string
		more  bool
	}{
		{"trail", 10, "trail p-1 p-3 p-6", false},
		{"TRAIL", 2, "p-1 p-3", true}, // the exact id is case-sensitive: "trail" comes in id order
		{"trail", 1, "trail", true},
		{"shoe", 10, "p-1 p-6", false},
		{"p-", 10, "p-1 p-2 p-3 p-4 p-6", false},
		{"p-", 3, "p-1 p-2 p-3", true},
		{"BRÛLÉE", 10, "p-4", false},
		{"winter", 10, "p-2", false},
		{"nothing like it", 10, "", false},
	} {
		found, more, err := svc.SearchProducts(t.Context(), mp, "", tc.q, tc.limit)
		var ids []string
		for _, p := range found {
			ids = append(ids, p.ID)
			if p.Name == "" {
				t.Errorf("%q: %s without its name", tc.q, p.ID)
			}
		}
		if err != nil || strings.Join(ids, " ") != tc.want || more != tc.more {
			t.Errorf("search %q (limit %d) = %q more %v %v, want %q more %v", tc.q, tc.limit, ids, more, err, tc.want, tc.more)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := svc.SearchProducts(ctx, mp, "", "trail", 10); errkind.KindOf(err) != errkind.Unavailable {
		// A small catalog may finish before the first check; the error, when there is one, is of the kind.
		if err != nil {
			t.Fatalf("a search past its deadline: %v", err)
		}
	}
}

// BenchmarkSearchAll: a search of a marketplace of ENDCAP_BENCH_PRODUCTS
// (default 1,000,000) products with names of 60 characters and
// descriptions (on disk), for a text that matches a few of them (rare), and
// for one that matches a part of them all (common: the search reads every
// segment of the names file).
//
//	ENDCAP_TEST_REQUIRE_STACK=1 go test ./management/catalog -run '^$' -bench SearchAll -benchtime 20x
//
// It reports the process's CPU time a search beside the wall clock.
func BenchmarkSearchAll(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_BENCH_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	_, brokers := testenv.Kafka(b)
	const mp = "0193a5b0-0000-7000-8000-0000000000bb"
	cl, err := kafka.NewClient(brokers, testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topics := kafka.TopicNames("search.")
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 1, 1, time.Hour, time.Hour)); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, 2000)
	for i := range n {
		id, name := catalog.BenchProduct(i)
		v := []byte(`{"type":"product","id":`)
		v = jsontext.AppendString(v, mp+"/"+id)
		v = append(v, `,"version":1,"writeId":"w`...)
		v = strconv.AppendInt(v, int64(i), 10)
		v = append(v, `","at":1,"state":{"name":`...)
		v = jsontext.AppendString(v, name)
		v = append(v, `,"active":true,"vendors":["v-1"],"details":{"description":`...)
		v = jsontext.AppendString(v, strings.Repeat(name, 3))
		v = append(v, `}}}`...)
		recs = append(recs, &kgo.Record{Topic: topics.Entities, Key: []byte("product/" + mp + "/" + id), Value: v})
		if len(recs) == cap(recs) || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	texts := testenv.SpillStore(b)
	l, err := statelog.New(topics.Entities, brokers, cl, testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	cat := catalog.New(l, texts)
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(rctx) }()
	defer func() { stop(); <-done; l.Close() }()
	if err := l.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	if got := cat.ProductCount(mp); got != n {
		b.Fatalf("%d products loaded, want %d", got, n)
	}
	for _, bc := range []struct {
		name, q string
		want    int
	}{
		{"rare", "needle", (n + 99_992) / 100_000},
		{"common", "coffee beans", 50},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cpu0 := catalog.CPUTime()
			for range b.N {
				found, _, err := cat.SearchProducts(ctx, mp, "", bc.q, 50)
				if err != nil || len(found) != min(bc.want, n) {
					b.Fatalf("%d found, %v", len(found), err)
				}
			}
			// The process's CPU time (user and system) a search: steadier
			// than the wall clock on a shared machine.
			b.ReportMetric(float64(catalog.CPUTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

package auction_test

// The memory an API process spends per product: the catalog, the campaigns
// and the auction index loaded cold from the entities topic, as a process
// loads them at start (docs/operations/operations.md, Memory).

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/perfbudget"
	"github.com/endcap/endcap/testkit/testenv"
)

// memProducts is how many products TestMemoryPerProduct loads.
const memProducts = 100_000

// appendTypicalProduct appends the log's record of product i: the catalog's
// typical product (docs/reference/catalog.md, Scale): a 60-character name, a
// 500-character description, one vendor of 1,000, 3 categories of 2,000,
// brand, image URL, price, quality score and GTIN.
func appendTypicalProduct(b []byte, mp string, i int) []byte {
	id := typicalID(i)
	h := uint64(i)*0x9e3779b97f4a7c15 + 12345
	h ^= h >> 31
	const soup = "organic cotton shirt blue large steel bottle coffee beans roasted wireless headphones noise cancelling "
	text := func(n int, salt uint64) []byte {
		out := make([]byte, 0, n)
		for k := uint64(0); len(out) < n; k++ {
			w := (h + salt + k*7) % uint64(len(soup)-12)
			out = append(out, soup[w:w+12]...)
		}
		return out[:n]
	}
	b = append(b, `{"type":"product","id":`...)
	b = jsontext.AppendString(b, mp+"/"+id)
	b = append(b, `,"version":1,"writeId":"w`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","at":1,"state":{"name":`...)
	b = jsontext.AppendString(b, string(text(60, 1)))
	b = append(b, `,"active":true,"vendors":["v-`...)
	b = strconv.AppendUint(b, h%1000, 10)
	b = append(b, `"],"categories":[`...)
	for k := uint64(0); k < 3; k++ {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `"c-`...)
		b = strconv.AppendUint(b, (h/7+k)%2000, 10)
		b = append(b, '"')
	}
	b = append(b, `],"priceMicros":`...)
	b = strconv.AppendUint(b, 990_000+h%100_000_000, 10)
	b = append(b, `,"qualityScore":0.`...)
	b = strconv.AppendUint(b, 1+h%99, 10)
	b = append(b, `,"details":{"description":`...)
	b = jsontext.AppendString(b, string(text(500, 2)))
	b = append(b, `,"brand":{"id":"b-`...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `","name":"Brand `...)
	b = strconv.AppendUint(b, h%500, 10)
	b = append(b, `"},"imageURL":"https://cdn.example.com/img/`...)
	b = append(b, id...)
	b = append(b, `.jpg","gtin":"4006381333931"}}}`...)
	return b
}

func typicalID(i int) string { return "p-" + strconv.Itoa(1_000_000_000 + i)[1:] }

// produceProducts writes n typical products of mp to the entities topic of
// prefix, as the catalog's writes would have.
func produceProducts(t testing.TB, brokers []string, prefix, mp string, n int) {
	t.Helper()
	cl, err := kafka.NewClient(brokers, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topics := kafka.TopicNames(prefix)
	if err := kafka.EnsureTopics(ctx, cl, kafka.Specs(topics, 1, 1, time.Hour, time.Hour)); err != nil {
		t.Fatal(err)
	}
	const batch = 2000
	recs := make([]*kgo.Record, 0, batch)
	for i := 0; i < n; i++ {
		v := appendTypicalProduct(nil, mp, i)
		recs = append(recs, &kgo.Record{Topic: topics.Entities, Key: []byte("product/" + mp + "/" + typicalID(i)), Value: v})
		if len(recs) == batch || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// settledHeap is the live heap once kfake has let go of a closed
// connection's buffers (it does so on its own goroutines): the least of
// readings taken until one is not lower than the one before, for at most
// five seconds.
func settledHeap() uint64 {
	low := liveHeap()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		h := liveHeap()
		if h+64<<10 >= low {
			return min(h, low)
		}
		low = h
	}
	return low
}

// apiView loads, cold from the topic, what an API process holds of the
// entities: the catalog, the campaigns and the auction index. It returns
// the heap they take once loaded and the load's time.
func apiView(t testing.TB, brokers []string, prefix string) (heap uint64, took time.Duration, cat *catalog.Service) {
	t.Helper()
	before := liveHeap()
	start := time.Now()
	texts := testenv.SpillStore(t)
	cl, err := kafka.NewClient(brokers, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l, err := statelog.New(kafka.TopicNames(prefix).Entities, brokers, cl, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	cat = catalog.New(l, texts)
	camps := campaigns.New(l, cat, nil, nil, nil)
	ix := index.New()
	ix.Register(cat, camps)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done; l.Close() })
	// Wait as long as the load takes (a few seconds at 100,000 products;
	// the test's own deadline bounds it).
	if err := l.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	took = time.Since(start)
	// The view stays in memory; its consumer's connection goes, and with it
	// the fetch buffers kfake (the broker, in this process) keeps for it:
	// they are the broker's, not the API process's.
	stop()
	<-done
	l.Close()
	heap = settledHeap() - before
	runtime.KeepAlive(camps)
	runtime.KeepAlive(ix)
	return heap, took, cat
}

func writeHeapProfile(t testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryPerProduct: the live heap an API process's entity state takes
// per product, loaded cold from the topic, within 10 % of its budget
// (testkit/perfbudget/budgets.txt, catalog.heap-bytes-per-product). It
// counts bytes allocated (after a full collection), which do not depend on
// how busy the machine is. ENDCAP_TEST_PRODUCTS scales it (the 10 M
// measurement of docs/design/performance.md, Catalog in memory).
func TestMemoryPerProduct(t *testing.T) {
	n := memProducts
	if v, err := strconv.Atoi(os.Getenv("ENDCAP_TEST_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	_, brokers := testenv.Kafka(t)
	const mp = "0193a5b0-0000-7000-8000-0000000000aa"
	t0 := time.Now()
	produceProducts(t, brokers, "mem.", mp, n)
	t.Logf("%d products produced in %v", n, time.Since(t0).Round(time.Millisecond))
	heap, took, cat := apiView(t, brokers, "mem.")
	if got := cat.ProductCount(mp); got != n {
		t.Fatalf("the view holds %d products, want %d", got, n)
	}
	if path := os.Getenv("ENDCAP_TEST_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, path) // where the bytes are: go tool pprof -sample_index=inuse_space
	}
	perProduct := float64(heap) / float64(n)
	t.Logf("loaded %d products in %v: live heap %d MiB, %.0f B a product; VmRSS %s (with kfake's copy of the topic)", n, took.Round(time.Millisecond), heap>>20, perProduct, vmRSS())
	if n == memProducts {
		perfbudget.Check(t, "catalog.heap-bytes-per-product", perProduct)
	}
}

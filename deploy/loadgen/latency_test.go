package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 123456789, 1 << 40, math.MaxInt64} {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d after %d", v, i, prev)
		}
		prev = i
		mid := histValue(i)
		if v >= histSub && math.Abs(float64(mid-v)) > float64(v)/256+1 {
			t.Errorf("value %d in bucket %d with midpoint %d", v, i, mid)
		}
		if v < histSub && mid != v {
			t.Errorf("small value %d reported as %d", v, mid)
		}
	}
	// Every value maps to the bucket whose range holds it: check the bucket edges around powers of two.
	for e := histSubBits; e < 62; e++ {
		for _, v := range []int64{1<<e - 1, 1 << e, 1<<e + 1} {
			if i := histIndex(v); histIndex(histValue(i)) != i {
				t.Fatalf("midpoint of bucket %d (value %d) falls in another bucket", i, v)
			}
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h histogram
	vals := make([]int64, 200000)
	for i := range vals {
		// log-uniform between 10 µs and 10 s
		vals[i] = int64(math.Exp(math.Log(1e4) + rng.Float64()*(math.Log(1e10)-math.Log(1e4))))
		h.record(vals[i])
	}
	var maxV int64
	for _, v := range vals {
		maxV = max(maxV, v)
	}
	exact := quantilesExact(slices.Clone(vals))
	approx := quantilesHist(&h, int64(len(vals)), maxV)
	for i := range exact {
		if rel := math.Abs(float64(approx[i]-exact[i])) / float64(exact[i]); rel > 0.005 {
			t.Errorf("q%v: histogram %v, exact %v (%.3f%%)", latencyQuantiles[i], approx[i], exact[i], rel*100)
		}
	}
}

func TestQuantilesExactNearestRank(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(1000 - i) // 1..1000, reversed
	}
	q := quantilesExact(s)
	if q != [4]time.Duration{500, 900, 990, 999} {
		t.Errorf("quantiles %v", q)
	}
	if q := quantilesExact([]int64{7}); q != [4]time.Duration{7, 7, 7, 7} {
		t.Errorf("single sample: %v", q)
	}
}

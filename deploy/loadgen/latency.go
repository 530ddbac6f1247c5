package loadgen

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// maxLatencySamples caps the exact latency samples kept for a run (8 bytes each, ~40 MB). Each worker may
// keep maxLatencySamples/Concurrency; once a worker has more, the run's percentiles come from the
// histograms instead (every sample is always recorded in its worker's histogram too). A variable so that
// tests can lower it.
var maxLatencySamples = 5_000_000

// Log-linear histogram in the manner of HDR histograms: values below 2^histSubBits ns are counted exactly;
// above, every power of two is split into 2^histSubBits equal buckets, so a bucket is at most 1/128 of its
// value wide and the midpoint we report is within 0.4% of any value in it.
const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	histBuckets = (64-histSubBits)*histSub + histSub
)

type histogram [histBuckets]int64

func histIndex(v int64) int {
	if v < histSub {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // top bit, ≥ histSubBits
	m := uint64(v) >> uint(e-histSubBits)
	return (e-histSubBits+1)*histSub + int(m) - histSub
}

// histValue is the midpoint of bucket i.
func histValue(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	g := i / histSub // ≥ 1
	m := int64(i%histSub + histSub)
	shift := uint(g - 1)
	lo := m << shift
	return lo + (int64(1)<<shift)/2
}

func (h *histogram) record(v int64) { h[histIndex(v)]++ }

func (h *histogram) merge(o *histogram) {
	for i, c := range o {
		h[i] += c
	}
}

// rank is the nearest-rank index (0-based) of quantile q among n sorted values.
func rank(q float64, n int64) int64 {
	r := int64(math.Ceil(q*float64(n))) - 1
	if r < 0 {
		r = 0
	}
	if r >= n {
		r = n - 1
	}
	return r
}

// quantile of the histogram's values by nearest rank; n is the total count.
func (h *histogram) quantile(q float64, n int64) int64 {
	if n == 0 {
		return 0
	}
	target := rank(q, n) + 1
	var cum int64
	for i, c := range h {
		cum += c
		if cum >= target {
			return histValue(i)
		}
	}
	return 0
}

// latencyQuantiles are the quantiles a Report shows.
var latencyQuantiles = [4]float64{0.50, 0.90, 0.99, 0.999}

// quantilesExact sorts samples in place and returns the latencyQuantiles by nearest rank.
func quantilesExact(samples []int64) (out [4]time.Duration) {
	if len(samples) == 0 {
		return out
	}
	slices.Sort(samples)
	for i, q := range latencyQuantiles {
		out[i] = time.Duration(samples[rank(q, int64(len(samples)))])
	}
	return out
}

func quantilesHist(h *histogram, n int64, maxV int64) (out [4]time.Duration) {
	for i, q := range latencyQuantiles {
		v := h.quantile(q, n)
		if v > maxV { // the midpoint of the top bucket may lie above the true maximum
			v = maxV
		}
		out[i] = time.Duration(v)
	}
	return out
}

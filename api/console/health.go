package console

import (
	"context"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sampler reads the process's own metrics every few seconds and keeps a
// minute of samples, from which the health page computes rates.
type Sampler struct {
	g     prometheus.Gatherer
	every time.Duration

	mu      sync.Mutex
	samples []sample // oldest first, at most a minute
}

type sample struct {
	at          time.Time
	events      float64 // endcap_events_accepted_total
	auctions    float64 // endcap_auctions_total
	lag         map[string]float64
	hasLag      bool
	charges     *dto.Histogram // endcap_charge_visible_seconds
	hasProjects bool           // the process runs projectors
}

// NewSampler samples g (nil: the default registry) every 5 s.
func NewSampler(g prometheus.Gatherer) *Sampler {
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	return &Sampler{g: g, every: 5 * time.Second}
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample(time.Now())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Sampler) sample(now time.Time) {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return
	}
	x := sample{at: now, lag: map[string]float64{}}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "endcap_events_accepted_total":
			x.events = sum(mf)
		case "endcap_auctions_total":
			x.auctions = sum(mf)
		case "endcap_kafka_consumer_lag_records":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "group" {
						x.lag[l.GetValue()] += m.GetGauge().GetValue()
						x.hasLag = true
					}
				}
			}
		case "endcap_charge_visible_seconds":
			if ms := mf.GetMetric(); len(ms) > 0 {
				x.charges = ms[0].GetHistogram()
			}
		case "endcap_projector_stalled_seconds":
			x.hasProjects = len(mf.GetMetric()) > 0
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, x)
	for len(s.samples) > 2 && now.Sub(s.samples[0].at) > time.Minute+s.every {
		s.samples = s.samples[1:]
	}
}

func sum(mf *dto.MetricFamily) float64 {
	var t float64
	for _, m := range mf.GetMetric() {
		if c := m.GetCounter(); c != nil {
			t += c.GetValue()
		}
	}
	return t
}

// Health is what the page shows.
type Health struct {
	Window      time.Duration // what the rates are over (0: not enough samples yet)
	EventsPerS  float64
	AuctionsPS  float64
	Lag         []GroupLag
	HasLag      bool
	Projectors  bool
	Charges     uint64  // charges made visible over the window
	ChargeP50   float64 // seconds (upper bound of the bucket), -1: none
	ChargeP95   float64
	ChargeTotal uint64
}

// GroupLag is a consumer group's lag in records.
type GroupLag struct {
	Group string
	Lag   float64
}

// Report computes the health from the samples.
func (s *Sampler) Report() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{ChargeP50: -1, ChargeP95: -1}
	if len(s.samples) == 0 {
		return h
	}
	last := s.samples[len(s.samples)-1]
	for g, v := range last.lag {
		h.Lag = append(h.Lag, GroupLag{g, v})
	}
	sort.Slice(h.Lag, func(i, j int) bool { return h.Lag[i].Group < h.Lag[j].Group })
	h.HasLag, h.Projectors = last.hasLag, last.hasProjects
	if last.charges != nil {
		h.ChargeTotal = last.charges.GetSampleCount()
	}
	if len(s.samples) < 2 {
		return h
	}
	first := s.samples[0]
	dt := last.at.Sub(first.at)
	h.Window = dt
	h.EventsPerS = (last.events - first.events) / dt.Seconds()
	h.AuctionsPS = (last.auctions - first.auctions) / dt.Seconds()
	if last.charges != nil {
		h.Charges, h.ChargeP50, h.ChargeP95 = quantiles(first.charges, last.charges)
	}
	return h
}

// quantiles are the p50 and p95 of the observations between two snapshots
// of a histogram, each the upper bound of its bucket.
func quantiles(a, b *dto.Histogram) (uint64, float64, float64) {
	n := b.GetSampleCount()
	if a != nil {
		n -= a.GetSampleCount()
	}
	if n == 0 {
		return 0, -1, -1
	}
	q := func(p float64) float64 {
		want := uint64(math.Ceil(p * float64(n)))
		for i, bk := range b.GetBucket() {
			c := bk.GetCumulativeCount()
			if a != nil && i < len(a.GetBucket()) {
				c -= a.GetBucket()[i].GetCumulativeCount()
			}
			if c >= want {
				return bk.GetUpperBound()
			}
		}
		return math.Inf(1)
	}
	return n, q(0.5), q(0.95)
}

func (c *Console) healthPage(ctx *gin.Context) {
	var h Health
	if c.o.Health != nil {
		h = c.o.Health.Report()
	}
	c.render(ctx, http.StatusOK, "health", "Health", h)
}

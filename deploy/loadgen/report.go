package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is what RunEvents measured. Counts, rates and latencies cover the measured window only: requests
// that completed after the warmup and before the end of the window (or the early stop). JSON field names
// are snake_case and durations are marshalled as milliseconds (float), with an "_ms" suffix.
type Report struct {
	Requests int64         `json:"requests"` // measured requests (answered or failed in the window)
	OK       int64         `json:"ok"`       // 2xx
	Failed   int64         `json:"failed"`   // everything else: non-2xx and transport errors
	Statuses map[int]int64 `json:"statuses"` // count per HTTP status; 0 = transport error (refused, reset, timeout...)
	Events   int64         `json:"events"`   // events in 2xx responses (accepted)
	Elapsed  time.Duration `json:"elapsed_ms"`

	EventsPerSec   float64 `json:"events_per_sec"`
	RequestsPerSec float64 `json:"requests_per_sec"`

	// Latency of all measured requests, failures included: from the moment the request was handed to the
	// HTTP client (closed loop) or from its scheduled send time (open loop), to the end of the response body.
	P50  time.Duration `json:"p50_ms"`
	P90  time.Duration `json:"p90_ms"`
	P99  time.Duration `json:"p99_ms"`
	P999 time.Duration `json:"p999_ms"`
	Max  time.Duration `json:"max_ms"`
	Mean time.Duration `json:"mean_ms"`
	// OKP50 and OKP99 are the same latency of the 2xx answers alone: what the clients whose requests were
	// accepted saw, when others were shed (503) or failed fast.
	OKP50 time.Duration `json:"ok_p50_ms"`
	OKP99 time.Duration `json:"ok_p99_ms"`
	// LatencyExact is true when the percentiles come from every sample; false when the run had more than
	// ~5M measured requests (a worker kept more than 5M/Concurrency) and they come from a log-linear histogram
	// (within 0.4%). Max and Mean are exact.
	LatencyExact bool `json:"latency_exact"`

	// FirstError describes the first failure of the run ("HTTP 503: <start of body>" or the transport
	// error), warmup included; empty if none.
	FirstError string `json:"first_error,omitempty"`

	// Whole-run bookkeeping, to reconcile with what the server stored.
	WarmupRequests int64 `json:"warmup_requests"` // completed during the warmup, not measured
	// Abandoned requests were still in flight when the run stopped and were cancelled (or answered after the
	// window closed); their events may or may not have been stored.
	Abandoned     int64 `json:"abandoned"`
	EventsSentAll int64 `json:"events_sent_all"` // events in every request sent, warmup and abandoned included
	EventsOKAll   int64 `json:"events_ok_all"`   // events in every 2xx response, warmup and late ones included

	// Stopped says why the run ended: "duration", "max_requests" or "canceled" (ctx done).
	Stopped string `json:"stopped"`

	// The settings in force (after defaults).
	Concurrency int     `json:"concurrency"`
	BatchSize   int     `json:"batch_size"`
	TargetRate  float64 `json:"target_rate"` // 0 = closed loop
	// Unsent counts open-loop sends that were due before the run stopped but never went out because every
	// worker was busy: when it is not 0 the generator (or its Concurrency) could not hold the target rate.
	Unsent int64 `json:"unsent"`

	// Timeline is the measured window second by second, by the second in which each request was due (open
	// loop) or sent (closed loop): where in a run its slow requests were, to set beside what the server did
	// then (a collection, a merge). Seconds without a request are left out.
	Timeline []Second `json:"timeline,omitempty"`
	// MeasureStart is when the measured window began (wall clock): Timeline's second 0.
	MeasureStart time.Time `json:"measure_start"`

	// Failures are the requests not answered 2xx, with EventsConfig.RecordFailures (not in the JSON: the
	// command writes them to a file of their own, `loadgen events --failures`).
	Failures []Failure `json:"-"`

	bufDrops int64 // body buffers not reused because a write of them might still be running (tests)
}

// Second is one second of Report.Timeline.
type Second struct {
	At       int           // seconds since the start of the measured window
	Requests int64         // measured requests due (sent) in that second
	Slow     int64         // of which slower than the run's SlowAfter (failures count as slow)
	Max      time.Duration // the slowest of them
}

type secondJSON struct {
	At       int     `json:"s"`
	Requests int64   `json:"requests"`
	Slow     int64   `json:"slow"`
	Max      float64 `json:"max_ms"`
}

type reportJSON struct {
	Requests       int64            `json:"requests"`
	OK             int64            `json:"ok"`
	Failed         int64            `json:"failed"`
	Statuses       map[string]int64 `json:"statuses"`
	Events         int64            `json:"events"`
	Elapsed        float64          `json:"elapsed_ms"`
	EventsPerSec   float64          `json:"events_per_sec"`
	RequestsPerSec float64          `json:"requests_per_sec"`
	P50            float64          `json:"p50_ms"`
	P90            float64          `json:"p90_ms"`
	P99            float64          `json:"p99_ms"`
	P999           float64          `json:"p999_ms"`
	Max            float64          `json:"max_ms"`
	Mean           float64          `json:"mean_ms"`
	OKP50          float64          `json:"ok_p50_ms"`
	OKP99          float64          `json:"ok_p99_ms"`
	LatencyExact   bool             `json:"latency_exact"`
	FirstError     string           `json:"first_error,omitempty"`
	WarmupRequests int64            `json:"warmup_requests"`
	Abandoned      int64            `json:"abandoned"`
	EventsSentAll  int64            `json:"events_sent_all"`
	EventsOKAll    int64            `json:"events_ok_all"`
	Stopped        string           `json:"stopped"`
	Concurrency    int              `json:"concurrency"`
	BatchSize      int              `json:"batch_size"`
	TargetRate     float64          `json:"target_rate"`
	Unsent         int64            `json:"unsent"`
	Timeline       []secondJSON     `json:"timeline,omitempty"`
	MeasureStart   time.Time        `json:"measure_start"`
}

func ms(d time.Duration) float64     { return float64(d) / float64(time.Millisecond) }
func fromMS(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Millisecond))) }

// MarshalJSON writes the report with durations as milliseconds.
func (r Report) MarshalJSON() ([]byte, error) { return json.Marshal(r.toJSON()) }

func (r Report) toJSON() reportJSON {
	j := reportJSON{
		Requests: r.Requests, OK: r.OK, Failed: r.Failed, Events: r.Events,
		Elapsed: ms(r.Elapsed), EventsPerSec: r.EventsPerSec, RequestsPerSec: r.RequestsPerSec,
		P50: ms(r.P50), P90: ms(r.P90), P99: ms(r.P99), P999: ms(r.P999), Max: ms(r.Max), Mean: ms(r.Mean),
		OKP50: ms(r.OKP50), OKP99: ms(r.OKP99), LatencyExact: r.LatencyExact, FirstError: r.FirstError, WarmupRequests: r.WarmupRequests,
		Abandoned: r.Abandoned, EventsSentAll: r.EventsSentAll, EventsOKAll: r.EventsOKAll, Stopped: r.Stopped,
		Concurrency: r.Concurrency, BatchSize: r.BatchSize, TargetRate: r.TargetRate, Unsent: r.Unsent,
		Statuses: make(map[string]int64, len(r.Statuses)), MeasureStart: r.MeasureStart,
	}
	for code, n := range r.Statuses {
		j.Statuses[strconv.Itoa(code)] = n
	}
	for _, t := range r.Timeline {
		j.Timeline = append(j.Timeline, secondJSON{At: t.At, Requests: t.Requests, Slow: t.Slow, Max: ms(t.Max)})
	}
	return j
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Report{
		Requests: j.Requests, OK: j.OK, Failed: j.Failed, Events: j.Events,
		Elapsed: fromMS(j.Elapsed), EventsPerSec: j.EventsPerSec, RequestsPerSec: j.RequestsPerSec,
		P50: fromMS(j.P50), P90: fromMS(j.P90), P99: fromMS(j.P99), P999: fromMS(j.P999), Max: fromMS(j.Max),
		Mean: fromMS(j.Mean), OKP50: fromMS(j.OKP50), OKP99: fromMS(j.OKP99), LatencyExact: j.LatencyExact, FirstError: j.FirstError,
		WarmupRequests: j.WarmupRequests, Abandoned: j.Abandoned, EventsSentAll: j.EventsSentAll,
		EventsOKAll: j.EventsOKAll, Stopped: j.Stopped, Concurrency: j.Concurrency, BatchSize: j.BatchSize,
		TargetRate: j.TargetRate, Unsent: j.Unsent, Statuses: make(map[int]int64, len(j.Statuses)),
		MeasureStart: j.MeasureStart,
	}
	for k, n := range j.Statuses {
		code, err := strconv.Atoi(k)
		if err != nil {
			return fmt.Errorf("loadgen: bad status key %q", k)
		}
		r.Statuses[code] = n
	}
	for _, t := range j.Timeline {
		r.Timeline = append(r.Timeline, Second{At: t.At, Requests: t.Requests, Slow: t.Slow, Max: fromMS(t.Max)})
	}
	return nil
}

// String is a human-readable multi-line summary.
func (r Report) String() string {
	var b strings.Builder
	mode := "closed loop"
	if r.TargetRate > 0 {
		mode = fmt.Sprintf("open loop at %.0f req/s", r.TargetRate)
	}
	fmt.Fprintf(&b, "POST /v2/events: %s, concurrency %d, %d events/request, measured %.3fs (stopped: %s)\n",
		mode, r.Concurrency, r.BatchSize, r.Elapsed.Seconds(), r.Stopped)
	fmt.Fprintf(&b, "  requests  %d (ok %d, failed %d)  %.1f req/s\n", r.Requests, r.OK, r.Failed, r.RequestsPerSec)
	fmt.Fprintf(&b, "  events    %d accepted  %.0f events/s\n", r.Events, r.EventsPerSec)
	r.writeStatuses(&b)
	r.writeLatency(&b)
	fmt.Fprintf(&b, "  run       warmup requests %d, abandoned at stop %d, events sent %d, events accepted %d (whole run)\n",
		r.WarmupRequests, r.Abandoned, r.EventsSentAll, r.EventsOKAll)
	if r.Unsent > 0 {
		fmt.Fprintf(&b, "  WARNING   %d scheduled requests were never sent: the target rate was not held\n", r.Unsent)
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, "  first error: %s\n", r.FirstError)
	}
	return b.String()
}

// writeStatuses writes the "statuses" line of String.
func (r Report) writeStatuses(b *strings.Builder) {
	codes := make([]int, 0, len(r.Statuses))
	for c := range r.Statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	b.WriteString("  statuses ")
	for _, c := range codes {
		if c == 0 {
			fmt.Fprintf(b, " transport-error=%d", r.Statuses[c])
		} else {
			fmt.Fprintf(b, " %d=%d", c, r.Statuses[c])
		}
	}
	b.WriteByte('\n')
}

// writeLatency writes the "latency" line of String.
func (r Report) writeLatency(b *strings.Builder) {
	exact := ""
	if !r.LatencyExact && r.Requests > 0 {
		exact = " (histogram)"
	}
	fmt.Fprintf(b, "  latency   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s%s\n",
		fmtDur(r.P50), fmtDur(r.P90), fmtDur(r.P99), fmtDur(r.P999), fmtDur(r.Max), fmtDur(r.Mean), exact)
	if r.Failed > 0 && r.OK > 0 {
		fmt.Fprintf(b, "  2xx alone p50 %s  p99 %s\n", fmtDur(r.OKP50), fmtDur(r.OKP99))
	}
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fms", ms(d))
}

// WriteFailures writes one line a failure: its request key, a tab, its status (0: a transport error, -1:
// unanswered when the run stopped). deploy/local/bench-overload.sh reads them to tell which of the events
// stored came from requests answered 503.
func WriteFailures(w io.Writer, fs []Failure) error {
	bw := bufio.NewWriter(w)
	for _, f := range fs {
		bw.WriteString(f.Key)
		bw.WriteByte('\t')
		bw.WriteString(strconv.Itoa(f.Status))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

package loadgen

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// RunEvents posts generated event batches to cfg.URL + "/v2/events" and reports what it measured.
//
// The run lasts Warmup + Duration. Requests that complete during the warmup are not measured; requests
// that complete in the window [start+Warmup, start+Warmup+Duration) are. When the window closes, requests
// still in flight are cancelled and counted as Abandoned, so the run stops on time whatever the server does.
// The run also stops early when ctx is done (Stopped = "canceled", a partial report and a nil error) or when
// MaxRequests requests have been sent (Stopped = "max_requests").
//
// Closed loop (Rate == 0): each of the Concurrency workers sends its next request as soon as it has read the
// previous answer; latency is measured from handing the request to the HTTP client to the end of the
// response body.
//
// Open loop (Rate > 0): request k is due at start + k/Rate, whatever happened before. Workers take the next
// due slot from a shared counter, sleep until its time and send it; when every worker is busy the slots pile
// up and go out late. Latency is measured from the scheduled (due) time, not from the actual send, so the
// time a request spent waiting for a free worker because the server was slow counts against the server.
// This corrects for coordinated omission: a stalled server cannot hide its stall by holding back the load
// that would have arrived meanwhile. Slots still pending when the run stops are reported as Unsent.
//
// The error is non-nil only for an invalid configuration; failures of requests are counted in the report.
func RunEvents(ctx context.Context, cfg EventsConfig) (Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	return runLoad(ctx, cfg, loadTarget{
		path: eventsPath,
		newBody: func(worker int, runID [8]byte) requestBody {
			return newBodyBuilder(runID, worker, cfg.Seed, cfg.BatchSize, cfg.Users, cfg.Products)
		},
	})
}

// loadTarget is what a run sends: the path (appended to cfg.URL) and a body writer per worker.
type loadTarget struct {
	path    string
	newBody func(worker int, runID [8]byte) requestBody
	// readBody keeps each answer's body in the worker's buffer; a 2xx answer of a measured request is then
	// handed to the body writer if it implements answerInspector.
	readBody bool
}

// requestBody writes the requests of one worker (not safe for concurrent use).
type requestBody interface {
	build(dst []byte, now time.Time) []byte // appends one body to dst[:0]
	sizeHint() int                          // a generous body size, to pre-size buffers
	events() int                            // items per request, counted in Report.Events
}

// requestKeyer is a body writer whose events' ids carry their request's key (bodyBuilder): EventsConfig's
// IDPrefix and RecordFailures apply to it.
type requestKeyer interface {
	setIDPrefix(p string)
	lastRequestKey() string
}

// Failure is a request of the run not answered 2xx (EventsConfig.RecordFailures).
type Failure struct {
	Key    string // the request's key: every id of its events starts with it
	Status int    // its HTTP status; 0 = a transport error; StatusUnanswered = cut off by the end of the run
}

// StatusUnanswered is Failure.Status of a request still in flight when the run stopped (cancelled).
const StatusUnanswered = -1

// answerInspector reads the body of a measured 2xx answer (only with loadTarget.readBody). It is called on
// the worker's goroutine after the request built last has been answered, before the next build.
type answerInspector interface {
	inspect(body []byte)
}

// runLoad is RunEvents for any target; cfg has its defaults. Only the fields shared by every target are
// read: URL, APIKey, Duration, Warmup, Concurrency, Rate, Timeout, MaxRequests.
func runLoad(ctx context.Context, cfg EventsConfig, tgt loadTarget) (Report, error) {
	u, err := targetURL(cfg.URL, tgt.path)
	if err != nil {
		return Report{}, err
	}
	var runID [8]byte
	if _, err := crand.Read(runID[:]); err != nil {
		return Report{}, err
	}

	tr := newTransport(cfg)
	defer tr.CloseIdleConnections()
	hdr := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
		"User-Agent":   {"endcap-loadgen/1"},
	}
	if cfg.APIKey != "" {
		hdr["Authorization"] = []string{"Bearer " + cfg.APIKey}
	}

	r := &run{
		cfg: cfg,
		tgt: tgt,
		client: &http.Client{
			Transport: tr,
			// A redirect is an answer to measure (and a misconfiguration to see), not to follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		tmpl: &http.Request{
			Method: http.MethodPost, URL: u, Host: u.Host, Header: hdr,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		},
	}
	if cfg.Rate > 0 {
		r.intervalNS = 1e9 / cfg.Rate
	}
	perWorkerCap := maxLatencySamples / cfg.Concurrency
	prealloc := 1 << 14
	if cfg.Rate > 0 {
		prealloc = int(cfg.Rate*cfg.Duration.Seconds()/float64(cfg.Concurrency)*1.2) + 64
	}
	prealloc = min(prealloc, perWorkerCap)

	workers := make([]*worker, cfg.Concurrency)
	for i := range workers {
		workers[i] = newWorker(r, i, runID, perWorkerCap, prealloc)
	}

	r.start = time.Now()
	r.measureStart = r.start.Add(cfg.Warmup)
	r.end = r.measureStart.Add(cfg.Duration)
	// The requests' contexts do not derive from ctx, so that none of its values (an httptrace of the caller's,
	// say) leaks into them; its cancellation does reach them.
	runCtx, cancel := context.WithDeadline(context.Background(), r.end)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(runCtx)
		}()
	}
	wg.Wait()
	stopTime := time.Now()

	rep := r.merge(workers)
	rep.MeasureStart = r.measureStart.Round(0) // wall clock only
	stopAt := r.end
	switch {
	case ctx.Err() != nil:
		rep.Stopped = "canceled"
		stopAt = stopTime
	case r.maxHit.Load():
		rep.Stopped = "max_requests"
		stopAt = stopTime
	default:
		rep.Stopped = "duration"
	}
	if stopAt.After(r.end) {
		stopAt = r.end
	}
	if stopAt.After(r.measureStart) {
		rep.Elapsed = stopAt.Sub(r.measureStart)
	}
	if s := rep.Elapsed.Seconds(); s > 0 {
		rep.RequestsPerSec = float64(rep.Requests) / s
		rep.EventsPerSec = float64(rep.Events) / s
	}
	if cfg.Rate > 0 && rep.Stopped != "max_requests" {
		due := int64(math.Ceil(stopAt.Sub(r.start).Seconds() * cfg.Rate))
		var sent int64
		for _, w := range workers {
			sent += w.sends
		}
		rep.Unsent = max(0, due-sent)
	}
	return rep, nil
}

// newTransport is one keep-alive HTTP/1.1 connection per worker to one host.
func newTransport(cfg EventsConfig) *http.Transport {
	d := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil, // never through an environment proxy
		DialContext:           d.DialContext,
		MaxIdleConns:          cfg.Concurrency,
		MaxIdleConnsPerHost:   cfg.Concurrency,
		MaxConnsPerHost:       cfg.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
		TLSHandshakeTimeout:   cfg.Timeout,
		WriteBufferSize:       64 << 10, // a whole batch (~16 KB) goes out in one write
		ReadBufferSize:        8 << 10,
		ExpectContinueTimeout: 0,
	}
}

// run is the state the workers share.
type run struct {
	cfg          EventsConfig
	tgt          loadTarget
	client       *http.Client
	tmpl         *http.Request // read-only; each request is a shallow copy with its own context and body
	start        time.Time
	measureStart time.Time
	end          time.Time
	intervalNS   float64 // open loop: nanoseconds between due times

	slot   atomic.Int64 // open loop: next due slot
	sent   atomic.Int64 // requests claimed, for MaxRequests
	maxHit atomic.Bool
}

// worker owns one connection's worth of load and all its bookkeeping; nothing in it is shared while the
// run is on.
type worker struct {
	r      *run
	bb     requestBody
	insp   answerInspector // nil unless the target reads answers and bb inspects them
	keyer  requestKeyer    // nil unless bb's ids carry request keys and the run records failures
	resp   bytes.Buffer    // the last answer's body, when the target reads answers
	pool   chan *bodyBuf
	hint   int
	events int64
	timer  *time.Timer
	errBuf [256]byte

	requests, ok, failed, evOK int64
	status                     [600]int64
	otherStatus                map[int]int64
	samples                    []int64
	sampleCap                  int
	overflow                   bool
	hist                       *histogram
	okSamples                  []int64    // the latencies of the measured 2xx answers, while not overflow
	okHist                     *histogram // the same, from the overflow on
	failures                   []Failure
	latSum, latMax             int64
	timeline                   []Second // by second of the due time since the measured window's start

	okMax                                        int64
	sends, warmup, abandoned, evSentAll, evOKAll int64
	dropped                                      int64 // body buffers not reused (see bodyBuf)
	firstErr                                     string
	firstErrAt                                   time.Time
}

func newWorker(r *run, id int, runID [8]byte, sampleCap, prealloc int) *worker {
	bb := r.tgt.newBody(id, runID)
	t := time.NewTimer(time.Hour)
	t.Stop()
	var insp answerInspector
	if r.tgt.readBody {
		insp, _ = bb.(answerInspector)
	}
	var keyer requestKeyer
	if k, ok := bb.(requestKeyer); ok {
		if r.cfg.IDPrefix != "" {
			k.setIDPrefix(r.cfg.IDPrefix)
		}
		if r.cfg.RecordFailures {
			keyer = k
		}
	}
	return &worker{
		r:         r,
		bb:        bb,
		insp:      insp,
		keyer:     keyer,
		pool:      make(chan *bodyBuf, 4),
		hint:      bb.sizeHint(),
		events:    int64(bb.events()),
		timer:     t,
		samples:   make([]int64, 0, prealloc),
		okSamples: make([]int64, 0, prealloc),
		sampleCap: sampleCap,
		hist:      new(histogram),
	}
}

func (w *worker) loop(ctx context.Context) {
	r := w.r
	defer w.timer.Stop()
	for ctx.Err() == nil {
		if r.cfg.MaxRequests > 0 && r.sent.Add(1) > r.cfg.MaxRequests {
			r.maxHit.Store(true)
			return
		}
		var due time.Time
		if r.intervalNS > 0 {
			k := r.slot.Add(1) - 1
			due = r.start.Add(time.Duration(float64(k) * r.intervalNS))
			if !due.Before(r.end) {
				return
			}
			if d := time.Until(due); d > 0 {
				w.timer.Reset(d)
				select {
				case <-w.timer.C:
				case <-ctx.Done():
					return
				}
			}
		}
		w.send(ctx, due)
	}
}

// send builds, sends and records one request. due is the open-loop due time (zero in closed loop).
func (w *worker) send(ctx context.Context, due time.Time) {
	r := w.r
	bb := w.getBuf()
	bb.b = w.bb.build(bb.b, time.Now())

	bb.arm()

	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	req := r.tmpl.WithContext(httptrace.WithClientTrace(rctx, bb.trace))
	req.Body = bb.body
	req.GetBody = bb.getBody
	req.ContentLength = int64(len(bb.b))

	w.sends++
	w.evSentAll += w.events
	t0 := time.Now()
	if due.IsZero() {
		due = t0
	}
	status := 0
	var errMsg string
	resp, err := r.client.Do(req)
	if err == nil {
		status = resp.StatusCode
		if r.tgt.readBody {
			w.resp.Reset()
			_, cerr := w.resp.ReadFrom(resp.Body)
			if cerr != nil {
				err, status = cerr, 0
			} else if (status < 200 || status > 299) && w.firstErr == "" {
				b := w.resp.Bytes()
				errMsg = "HTTP " + resp.Status + ": " + string(b[:min(len(b), len(w.errBuf))])
			}
		} else {
			if (status < 200 || status > 299) && w.firstErr == "" {
				n, _ := io.ReadFull(resp.Body, w.errBuf[:])
				errMsg = "HTTP " + resp.Status + ": " + string(w.errBuf[:n])
			}
			if _, cerr := io.Copy(io.Discard, resp.Body); cerr != nil {
				err, status, errMsg = cerr, 0, ""
			}
		}
		resp.Body.Close()
	}
	cancel()
	done := time.Now()
	w.recycle(bb)

	ok := status >= 200 && status <= 299
	if ok {
		w.evOKAll += w.events
	}
	cutOff := ctx.Err() != nil && (err != nil || !done.Before(r.end))
	if !ok && w.keyer != nil {
		f := Failure{Key: w.keyer.lastRequestKey(), Status: status}
		if status == 0 && cutOff {
			f.Status = StatusUnanswered
		}
		w.failures = append(w.failures, f)
	}
	switch {
	case cutOff:
		// Cut off by the end of the run (or answered after the window closed): not measured.
		w.abandoned++
		return
	case done.Before(r.measureStart):
		w.warmup++
	default:
		w.requests++
		if status >= 0 && status < len(w.status) {
			w.status[status]++
		} else {
			if w.otherStatus == nil {
				w.otherStatus = make(map[int]int64)
			}
			w.otherStatus[status]++
		}
		if ok {
			w.ok++
			w.evOK += w.events
			if w.insp != nil {
				w.insp.inspect(w.resp.Bytes())
			}
		} else {
			w.failed++
		}
		lat := done.Sub(due)
		w.record(lat.Nanoseconds(), ok)
		w.second(due, lat, !ok)
	}
	if !ok && w.firstErr == "" {
		if err != nil {
			errMsg = err.Error()
		}
		w.firstErr, w.firstErrAt = errMsg, done
	}
}

// record counts a measured request's latency; ok: it was answered 2xx.
func (w *worker) record(lat int64, ok bool) {
	if lat < 0 {
		lat = 0
	}
	w.hist.record(lat)
	w.latSum += lat
	if lat > w.latMax {
		w.latMax = lat
	}
	if ok && lat > w.okMax {
		w.okMax = lat
	}
	if !w.overflow && len(w.samples) == w.sampleCap {
		// From now on the histograms only; the 2xx one gets the 2xx samples kept so far.
		w.overflow, w.samples = true, nil
		w.okHist = new(histogram)
		for _, v := range w.okSamples {
			w.okHist.record(v)
		}
		w.okSamples = nil
	}
	if w.overflow {
		if ok {
			w.okHist.record(lat)
		}
		return
	}
	w.samples = append(w.samples, lat)
	if ok {
		w.okSamples = append(w.okSamples, lat)
	}
}

// second counts a measured request in the timeline.
func (w *worker) second(due time.Time, lat time.Duration, failed bool) {
	at := max(0, int(due.Sub(w.r.measureStart)/time.Second)) // a warmup request answered late counts in second 0
	for len(w.timeline) <= at {
		w.timeline = append(w.timeline, Second{At: len(w.timeline)})
	}
	s := &w.timeline[at]
	s.Requests++
	if failed || lat > w.r.cfg.SlowAfter {
		s.Slow++
	}
	s.Max = max(s.Max, lat)
}

// merge adds up the workers' counts and computes the latency figures.
func (r *run) merge(workers []*worker) Report {
	rep := Report{
		Statuses:     map[int]int64{},
		Concurrency:  r.cfg.Concurrency,
		BatchSize:    r.cfg.BatchSize,
		TargetRate:   r.cfg.Rate,
		LatencyExact: true,
	}
	var nSamples, nOKSamples int
	var latSum, okMax int64
	var firstAt time.Time
	for _, w := range workers {
		nOKSamples += len(w.okSamples)
		okMax = max(okMax, w.okMax)
		if r.cfg.RecordFailures {
			rep.Failures = append(rep.Failures, w.failures...)
		}
		rep.Requests += w.requests
		rep.OK += w.ok
		rep.Failed += w.failed
		rep.Events += w.evOK
		rep.WarmupRequests += w.warmup
		rep.Abandoned += w.abandoned
		rep.EventsSentAll += w.evSentAll
		rep.EventsOKAll += w.evOKAll
		rep.bufDrops += w.dropped
		for code, n := range w.status {
			if n > 0 {
				rep.Statuses[code] += n
			}
		}
		for code, n := range w.otherStatus {
			rep.Statuses[code] += n
		}
		if w.overflow {
			rep.LatencyExact = false
		}
		nSamples += len(w.samples)
		latSum += w.latSum
		rep.Max = max(rep.Max, time.Duration(w.latMax))
		if w.firstErr != "" && (firstAt.IsZero() || w.firstErrAt.Before(firstAt)) {
			rep.FirstError, firstAt = w.firstErr, w.firstErrAt
		}
	}
	for _, w := range workers {
		for _, s := range w.timeline {
			for len(rep.Timeline) <= s.At {
				rep.Timeline = append(rep.Timeline, Second{At: len(rep.Timeline)})
			}
			t := &rep.Timeline[s.At]
			t.Requests += s.Requests
			t.Slow += s.Slow
			t.Max = max(t.Max, s.Max)
		}
	}
	rep.Timeline = slices.DeleteFunc(rep.Timeline, func(s Second) bool { return s.Requests == 0 })
	if rep.Requests == 0 {
		return rep
	}
	rep.Mean = time.Duration(latSum / rep.Requests)
	var q [4]time.Duration
	if rep.LatencyExact {
		all := make([]int64, 0, nSamples)
		for _, w := range workers {
			all = append(all, w.samples...)
			w.samples = nil
		}
		q = quantilesExact(all)
	} else {
		h := new(histogram)
		for _, w := range workers {
			h.merge(w.hist)
		}
		q = quantilesHist(h, rep.Requests, int64(rep.Max))
	}
	rep.P50, rep.P90, rep.P99, rep.P999 = q[0], q[1], q[2], q[3]
	if rep.OK == 0 {
		return rep
	}
	if rep.LatencyExact {
		ok := make([]int64, 0, nOKSamples)
		for _, w := range workers {
			ok = append(ok, w.okSamples...)
			w.okSamples = nil
		}
		q = quantilesExact(ok)
	} else {
		h := new(histogram)
		for _, w := range workers {
			if w.okHist != nil {
				h.merge(w.okHist)
			}
			for _, v := range w.okSamples { // a worker that never overflowed
				h.record(v)
			}
		}
		q = quantilesHist(h, rep.OK, okMax)
	}
	rep.OKP50, rep.OKP99 = q[0], q[2]
	return rep
}

// bodyBuf is a worker's reusable body buffer. The transport may still be writing a request after Do has
// returned (a server may answer before reading the whole body, a cancelled request may be picked up by a
// connection's write loop late), so a buffer goes back to the worker's pool only when every write of it is
// known to have finished: the httptrace WroteRequest hook, which fires at the end of each write of the
// request (after its last read of the body), has fired once per attempt (the first send plus one per GetBody
// retry). Otherwise the buffer is dropped and the worker allocates a new one: a rare, safe path.
//
// The body is an io.NopCloser around a *bytes.Reader on purpose: net/http recognises it as in-memory and
// writes headers and body in one write instead of flushing the headers first (one syscall and one TCP
// segment less per request).
type bodyBuf struct {
	b        []byte
	rd       bytes.Reader
	body     io.ReadCloser
	trace    *httptrace.ClientTrace
	getBody  func() (io.ReadCloser, error)
	attempts atomic.Int32
	wrote    atomic.Int32
}

func (w *worker) getBuf() *bodyBuf {
	select {
	case bb := <-w.pool:
		return bb
	default:
	}
	bb := &bodyBuf{b: make([]byte, 0, w.hint)}
	bb.body = io.NopCloser(&bb.rd)
	bb.trace = &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { bb.wrote.Add(1) }}
	bb.getBody = func() (io.ReadCloser, error) {
		bb.attempts.Add(1)
		return io.NopCloser(bytes.NewReader(bb.b)), nil
	}
	return bb
}

// arm readies bb (already filled) for one request.
func (bb *bodyBuf) arm() {
	bb.rd.Reset(bb.b)
	bb.attempts.Store(1)
	bb.wrote.Store(0)
}

// recycle returns bb to the pool if the transport is done with it; call it after Do has returned.
func (w *worker) recycle(bb *bodyBuf) {
	if bb.wrote.Load() != bb.attempts.Load() {
		w.dropped++
		return
	}
	select {
	case w.pool <- bb:
	default:
	}
}

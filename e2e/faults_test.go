package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/testkit/testenv"
)

// Bounds the fault suite holds every answer to (docs/operations/operations.md,
// Failure modes).
const (
	// readyzBound: /readyz answers from memory, whatever the dependencies do.
	readyzBound = time.Second
	// eventsBound: /v2/events answers 200 or 503 within the produce timeout
	// (1 s) and a margin for two shared cores.
	eventsBound = 3 * time.Second
	// catchUpBound: after a fault ends, every event acknowledged before
	// its end is folded within this long, with no restart by hand.
	catchUpBound = 60 * time.Second
	// writeBound: a /public/v1 write answers within its deadline (5 s) and
	// a margin.
	writeBound = 6500 * time.Millisecond
)

// retryExport requests an export as a careful client does while the broker
// hangs: the same request with the same Idempotency-Key every 2 s until it
// is accepted (at most 2 minutes). Each answer must come within writeBound
// and be 202, or 503 with Retry-After. It returns the export's id.
func retryExport(api *osProc, key string) (string, error) {
	day := time.Now().UTC().Format("2006-01-02")
	body := `{"dataset":"monitoring_metrics","dimensions":["day_local","campaign_id"],"metrics":["impressions","clicks"],` +
		`"granularity":"day_local","startDate":"` + day + `","endDate":"` + day + `","format":"csv"}`
	hdr := map[string]string{"Idempotency-Key": "fault-suite-export-1"}
	var tries []string
	for giveUp := time.Now().Add(2 * time.Minute); time.Now().Before(giveUp); time.Sleep(2 * time.Second) {
		start := time.Now()
		st, b, err := api.call("POST", "/public/v1/export-service/exports", key, body, 15*time.Second, hdr)
		took := time.Since(start)
		tries = append(tries, fmt.Sprintf("%d in %s", st, took.Round(time.Millisecond)))
		if err != nil || took > writeBound || (st != 202 && st != 503) {
			return "", fmt.Errorf("export try %d: %d after %s (bound %s): %s %v", len(tries), st, took.Round(time.Millisecond), writeBound, b, err)
		}
		if st == 202 {
			var e struct {
				ExportID string `json:"exportId"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.ExportID == "" {
				return "", fmt.Errorf("export answer %s: %v", b, err)
			}
			return e.ExportID, nil
		}
	}
	return "", fmt.Errorf("the export was never accepted: %v", tries)
}

// TestFaults runs the system as separate processes (an API, two projectors,
// an exporter, the broker, ClickHouse, Redis, the S3 server) under a steady
// load of events, auctions and clicks, and injects one fault after another:
// the broker paused and restarted, ClickHouse frozen while a projector
// joins, Redis frozen, a projector killed, the API restarted, a vendor's
// balance running out while Redis is frozen. Throughout, no
// request with a valid key gets 401 and every answer comes within its
// bound; after each fault, the fold catches up by itself; at the end every
// acknowledged event is stored once and every clicked winner charged once.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the system as separate processes and injects faults")
	}
	began := time.Now()
	s := newFaultStack(t)
	api := s.serve("api", "api")
	p1 := s.serve("projector-1", "projector")
	p2 := s.serve("projector-2", "projector")
	s.serve("exporter", "exporter")

	d := s.setUp(api, "Faults", api, p1, p2)
	mkKey, advKey := d.mkKey, d.advKey
	must := func(method, path, body string, want int) []byte {
		t.Helper()
		return s.must(api, advKey, method, path, body, want)
	}
	t.Logf("stack ready after %s", time.Since(began).Round(time.Millisecond))

	ld := startLoad(t, api, mkKey)
	pr := startProbes([]*osProc{api, p1, p2})
	defer ld.stop()
	defer pr.stop()
	// The stack works before any fault: clicks are acknowledged, and the
	// warm-up's events folded.
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := ld.clicks(); n < 5 {
			return fmt.Errorf("%d clicks acknowledged", n)
		}
		return nil
	})
	ld.setPhase("steady")
	if err := s.waitCaughtUp(ld, "steady", catchUpBound); err != nil {
		t.Fatal(err)
	}

	// A fault is a phase of the load: its events carry the phase's name.
	// After the fault the load goes on for 5 s (phase "<fault>-after"), and
	// "caught up" means that every event acknowledged until then, during
	// the fault and after it, is in ClickHouse: the fold works again.
	phase := func(name string, fault func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			ld.setPhase(name)
			from := time.Now()
			fault(t)
			ended := time.Now()
			t.Logf("during the fault: %s; slowest /readyz %s", ld.summary(from), pr.slowest(from).Round(time.Millisecond))
			ld.setPhase(name + "-after")
			time.Sleep(5 * time.Second)
			ld.setPhase(name + "-check")
			if err := s.waitCaughtUp(ld, name+"-check", catchUpBound); err != nil {
				// Whether the broker took events meanwhile tells a stalled
				// fold from a stalled broker.
				t.Errorf("not caught up within %s of the fault's end: %v (since the fault's end: %s)", catchUpBound, err, ld.summary(ended))
				s.diagnose(t)
			} else {
				t.Logf("caught up %s after the fault's end (%d events acknowledged during it, %d in the 5 s after)",
					time.Since(ended).Round(100*time.Millisecond), ld.ackedByPhase()[name], ld.ackedByPhase()[name+"-after"])
			}
			bad := append(ld.violations(from), pr.violations(from)...)
			for i, v := range bad {
				if i == 10 {
					t.Errorf("… and %d more answers out of bounds", len(bad)-i)
					break
				}
				t.Error(v)
			}
		})
	}

	var exportID string
	phase("broker paused", func(t *testing.T) {
		// Longer than any session timeout (the broker drops every member
		// when it wakes up), as long as an outage of a minute would be.
		resume := s.pause(s.kafka.pid())
		time.Sleep(3 * time.Second)
		// While the broker hangs, a write answers 503 within its deadline
		// (5 s)...
		start := time.Now()
		st, b, err := api.call("PUT", "/public/v1/catalog-search-service/catalogs/vendors", advKey, `{"vendors":[{"id":"v2","name":"V2"}]}`, 15*time.Second, nil)
		if took := time.Since(start); st != 503 || took > writeBound {
			t.Errorf("PUT vendors while the broker hangs: %d after %s (bound %s) %s %v, want 503", st, took.Round(time.Millisecond), writeBound, b, err)
		}
		// ... and a client that retries its export with an Idempotency-Key
		// until it is accepted gets one export, however many tries it took.
		retried := make(chan error, 1)
		go func() { id, err := retryExport(api, advKey); exportID = id; retried <- err }()
		time.Sleep(44 * time.Second)
		resume()
		if err := <-retried; err != nil {
			t.Error(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			rows, err := s.query("SELECT id FROM entity_state WHERE type = 'export' AND marketplace_id = ?", d.mp)
			if err != nil {
				return err
			}
			if len(rows) != 1 || rows[0][0] != exportID {
				return fmt.Errorf("exports stored: %v, want only %s", rows, exportID)
			}
			return nil
		})
	})

	phase("broker restarted", func(t *testing.T) {
		s.kafka.signal(t, syscall.SIGTERM)
		time.Sleep(2 * time.Second)
		s.restart(s.kafka)
	})

	// An outage of ClickHouse, Redis or S3 pulls no API replica from its
	// load balancer: the API's /readyz checks only its state and Kafka
	// (docs/operations/operations.md, Health).
	apiStaysReady := func(t *testing.T, from time.Time) {
		t.Helper()
		if bad := pr.notReady(api.name, from); len(bad) > 0 {
			t.Errorf("the API's /readyz was not 200 during the fault: %v", bad)
		}
	}

	phase("clickhouse frozen while a projector joins", func(t *testing.T) {
		defer apiStaysReady(t, time.Now())
		resume := s.pause(s.pid(localstack.ServiceClickHouse))
		time.Sleep(5 * time.Second)
		p3 := s.serve("projector-3", "projector")
		time.Sleep(25 * time.Second)
		resume()
		// The third projector folds its share once ClickHouse is back,
		// then leaves.
		time.Sleep(10 * time.Second)
		p3.signal(t, syscall.SIGTERM)
	})

	phase("redis frozen", func(t *testing.T) {
		defer apiStaysReady(t, time.Now())
		resume := s.pause(s.pid(localstack.ServiceRedis))
		time.Sleep(3 * time.Second)
		// The /public/v1 rate limiter lets reads through at once when Redis
		// does not answer (docs/operations/operations.md, Rate limits when Redis is
		// slow or down).
		for i := range 5 {
			start := time.Now()
			st, b, err := api.call("GET", "/public/v1/catalog-search-service/catalogs/vendors", advKey, "", 10*time.Second, nil)
			if took := time.Since(start); st != 200 || took > time.Second {
				t.Errorf("GET vendors %d while Redis is frozen: %d after %s %s %v, want 200 within 1 s", i, st, took.Round(time.Millisecond), b, err)
			}
		}
		// So are campaigns, without their spend (docs/reference/campaigns.md, Delivery).
		for i := range 3 {
			start := time.Now()
			st, b, err := api.call("GET", cpCampaign(d.campaign), advKey, "", 10*time.Second, nil)
			if took := time.Since(start); st != 200 || took > time.Second || !strings.Contains(string(b), `"available":false`) {
				t.Errorf("GET campaign %d while Redis is frozen: %d after %s %s %v, want 200 without spend within 1 s", i, st, took.Round(time.Millisecond), b, err)
			}
		}
		time.Sleep(12 * time.Second)
		resume()
	})

	// S3 hangs during an export: the export's attempts fail within the S3
	// deadlines (the stack's: 2 s a request, 5 s a part) and it ends
	// failed, rather than staying running for ENDCAP_EXPORT_TIMEOUT.
	phase("s3 frozen during an export", func(t *testing.T) {
		defer apiStaysReady(t, time.Now())
		resume := s.pause(s.pid(localstack.ServiceS3))
		defer resume()
		frozen := time.Now()
		day := time.Now().UTC().Format("2006-01-02")
		b := must("POST", "/public/v1/export-service/exports", `{"dataset":"monitoring_metrics","dimensions":["day_local"],"metrics":["impressions"],`+
			`"granularity":"day_local","startDate":"`+day+`","endDate":"`+day+`","format":"csv"}`, 202)
		var e struct {
			ExportID string `json:"exportId"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 90*time.Second, func() error {
			var v struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(must("GET", "/public/v1/export-service/exports/"+e.ExportID, "", 200), &v); err != nil {
				return err
			}
			if v.Status != "failed" {
				return fmt.Errorf("export %s with S3 frozen for %s", v.Status, time.Since(frozen).Round(time.Second))
			}
			return nil
		})
		t.Logf("the export failed %s after S3 froze", time.Since(frozen).Round(100*time.Millisecond))
		resume()
	})

	phase("projector killed", func(t *testing.T) {
		start, _, err := s.offsets(projections.EventsGroup, "endcap.events")
		if err != nil {
			t.Fatal(err)
		}
		p2.signal(t, syscall.SIGKILL)
		killed := time.Now()
		// Every partition's committed offset moves again: the survivor took
		// over the dead one's partitions. Meanwhile its lag gauge counts
		// them, not 0. A partition only counts as waiting once it has not
		// moved for longer than the gauge's refresh from the broker can
		// take (watch: every 5 s, each ask bounded by 3 s): the survivor's
		// own partitions may not have committed yet at the first looks.
		const waitingAfter = 9 * time.Second
		stuckSince, waiting, counted := map[int32]time.Time{}, map[int32]bool{}, map[int32]bool{}
		var took time.Duration
		testenv.Eventually(t, catchUpBound, func() error {
			now, ends, err := s.offsets(projections.EventsGroup, "endcap.events")
			if err != nil {
				return err
			}
			var stuck []int32
			for p, o := range start {
				if now[p] > o || now[p] >= ends[p] {
					delete(stuckSince, p)
					continue
				}
				stuck = append(stuck, p)
				if _, ok := stuckSince[p]; !ok {
					stuckSince[p] = time.Now()
				}
				if v, ok := p1.metric("endcap_kafka_consumer_lag_records", `group="`+projections.EventsGroup+`"`, fmt.Sprintf(`partition="%d"`, p)); ok && v > 0 {
					counted[p] = true
				}
				if time.Since(stuckSince[p]) >= waitingAfter {
					waiting[p] = true
				}
			}
			if len(stuck) > 0 {
				return fmt.Errorf("partitions %v have work and have not moved since the kill", stuck)
			}
			took = time.Since(killed)
			return nil
		})
		for p := range waiting {
			if !counted[p] {
				t.Errorf("the survivor's lag gauge of partition %d read 0 during the %s or more it waited for a new owner", p, waitingAfter)
			}
		}
		t.Logf("%d partitions waited %s or more for a new owner, each counted by the survivor's lag gauge", len(waiting), waitingAfter)
		t.Logf("every partition folded again %s after the kill", took.Round(100*time.Millisecond))
		if took > 30*time.Second {
			t.Errorf("the dead projector's partitions waited %s for the survivor (want under 30 s)", took.Round(time.Second))
		}
		s.restart(p2)
	})

	phase("api restarted under traffic", func(t *testing.T) {
		api.signal(t, syscall.SIGTERM)
		s.restart(api)
		s.waitReady(api, 90*time.Second)
		time.Sleep(2 * time.Second)
	})

	phase("balance runs out while redis is frozen", func(t *testing.T) {
		defer apiStaysReady(t, time.Now())
		balanceRunsOut(t, s, api)
	})

	// Auctions are free: a client can collect winners first and click them
	// later, when the auction no longer serves the campaign. The clicks are
	// recorded, and charged only as far as the budget goes.
	phase("overspend pattern", func(t *testing.T) {
		var small struct {
			ID string `json:"id"`
		}
		decodeJSON(t, must("POST", cpVendor("v1"), `{"name":"small","type":"listings","chargeType":"CPC","dailyBudget":1,"startDate":"2020-01-01T00:00:00Z"}`, 201), &small)
		must("POST", cpBids(small.ID), `{"targetType":"product","target":"P2","bidAmount":0.50}`, 201)
		var tokens []string
		testenv.Eventually(t, 30*time.Second, func() error {
			for len(tokens) < 20 {
				st, b, err := api.call("POST", "/v2/auctions", mkKey, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["P2"]}}]}`, 5*time.Second, nil)
				var out struct {
					Results []auResult `json:"results"`
				}
				if err != nil || st != 201 || json.Unmarshal(b, &out) != nil || len(out.Results) != 1 || len(out.Results[0].Winners) != 1 {
					return fmt.Errorf("auction for P2: %d %s %v", st, b, err)
				}
				tokens = append(tokens, out.Results[0].Winners[0].ResolvedBidID)
			}
			return nil
		})
		for i, tok := range tokens {
			body := fmt.Sprintf(`{"clicks":[{"id":"overspend-%d","occurredAt":%q,"opaqueUserId":"u-o","resolvedBidId":%q}]}`, i, ts(time.Now()), tok)
			if st, b, err := api.call("POST", "/v2/events", mkKey, body, 5*time.Second, nil); st != 200 {
				t.Fatalf("click %d: %d %s %v", i, st, b, err)
			}
		}
		// 20 clicks at 0.25 would be 5.00: 4 are charged (1.00), 16 refused.
		testenv.Eventually(t, catchUpBound, func() error {
			rows, err := s.query("SELECT toString(count()), toString(sum(amount_micros)) FROM charges WHERE campaign_id = ?", small.ID)
			if err != nil {
				return err
			}
			refused, err := s.query("SELECT toString(count()) FROM interactions WHERE campaign_id = ? AND refused_reason = 'daily_budget'", small.ID)
			if err != nil {
				return err
			}
			if rows[0][0] != "4" || rows[0][1] != "1000000" || refused[0][0] != "16" {
				return fmt.Errorf("campaign with a daily budget of 1.00: %s charges for %s µ, %s clicks refused; want 4 for 1000000 µ and 16 refused",
					rows[0][0], rows[0][1], refused[0][0])
			}
			return nil
		})
	})

	ld.stop()
	pr.stop()
	s.checkExactlyOnce(t, ld, d.mp, d.campaign)
	t.Logf("fault suite took %s", time.Since(began).Round(time.Second))
}

// caughtUp checks that every event acknowledged so far in every phase but
// current (the one under way) is in ClickHouse.
func (s *faultStack) caughtUp(ld *load, current string) error {
	want := ld.ackedByPhase()
	rows, err := s.query("SELECT splitByChar('/', event_id)[1] AS phase, toString(uniqExact(event_id)) FROM events WHERE startsWith(event_id, 'ft-') GROUP BY phase")
	if err != nil {
		return err
	}
	got := map[string]int{}
	for _, r := range rows {
		got[strings.TrimPrefix(r[0], "ft-")], _ = strconv.Atoi(r[1])
	}
	for phase, n := range want {
		if phase != current && got[phase] < n {
			return fmt.Errorf("%d of the %d events acknowledged in phase %q are in ClickHouse", got[phase], n, phase)
		}
	}
	return nil
}

// waitCaughtUp waits up to d for caughtUp. Its error says when the count
// last moved: a fold that stalled from the start, or one that was slow.
func (s *faultStack) waitCaughtUp(ld *load, current string, d time.Duration) error {
	began := time.Now()
	deadline := began.Add(d)
	var last string
	var moved time.Time
	for {
		err := s.caughtUp(ld, current)
		if err == nil {
			return nil
		}
		if err.Error() != last {
			last, moved = err.Error(), time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (as it read %s into the wait, the last change)", err, moved.Sub(began).Round(100*time.Millisecond))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkExactlyOnce: every acknowledged event is in ClickHouse once, and
// every winner clicked (once each) is charged once, with the Redis spend
// equal to the charges.
func (s *faultStack) checkExactlyOnce(t *testing.T, ld *load, mp, campaign string) {
	t.Helper()
	acked := ld.ackedAll()
	testenv.Eventually(t, catchUpBound, func() error {
		rows, err := s.query("SELECT event_id, toString(count()) FROM events WHERE startsWith(event_id, 'ft-') GROUP BY event_id")
		if err != nil {
			return err
		}
		stored := make(map[string]string, len(rows))
		for _, r := range rows {
			stored[r[0]] = r[1]
		}
		for _, id := range acked {
			if stored[id] == "" {
				return fmt.Errorf("acknowledged event %s is not in ClickHouse (%d of %d stored)", id, len(stored), len(acked))
			}
		}
		for id, n := range stored {
			if n != "1" {
				return fmt.Errorf("event %s is in ClickHouse %s times", id, n)
			}
		}
		t.Logf("%d acknowledged events stored once (%d more, answered 503 or unanswered, stored once too)", len(acked), len(stored)-len(acked))
		return nil
	})
	clicks := ld.clicks()
	var charged, sum int64
	testenv.Eventually(t, catchUpBound, func() error {
		rows, err := s.query("SELECT toString(count()), toString(uniqExact(auction_id, rank)), toString(sum(amount_micros)) FROM charges WHERE marketplace_id = ? AND campaign_id = ?", mp, campaign)
		if err != nil {
			return err
		}
		n, _ := strconv.ParseInt(rows[0][0], 10, 64)
		distinct, _ := strconv.ParseInt(rows[0][1], 10, 64)
		sum, _ = strconv.ParseInt(rows[0][2], 10, 64)
		if n != distinct {
			return fmt.Errorf("%d charges for %d distinct winners", n, distinct)
		}
		if n != int64(clicks) {
			return fmt.Errorf("%d charges for %d acknowledged clicks", n, clicks)
		}
		charged = n
		return nil
	})
	if spend := s.redisSpend(t, mp, campaign); spend != sum {
		t.Errorf("Redis total spend %d, charges sum to %d", spend, sum)
	}
	t.Logf("%d clicked winners charged once (%d µ, Redis agrees)", charged, sum)
}

// load is a steady client load on the API: two clients posting batches of
// 10 impressions every 50 ms, and one running an auction and clicking its
// winner every 200 ms. It records what was acknowledged and every answer
// out of bounds: a 401, a 5xx other than 503, a /v2/events answer slower
// than eventsBound.
type load struct {
	api  *osProc
	key  string
	stop func()

	mu      sync.Mutex
	phase   string
	acked   map[string]int // acknowledged events by phase
	ids     []string
	nclicks int
	tokens  []clickedToken // the winners clicked, in order
	bad     []violation
	answers []answer // every answer of /v2/events
}

// clickedToken is a winner's token and when its click was acknowledged.
type clickedToken struct {
	token string
	at    time.Time
}

type answer struct {
	at     time.Time
	status int // 0: no answer
	took   time.Duration
	proc   string // of a /readyz probe: the process asked
}

type violation struct {
	at  time.Time
	msg string
}

func (v violation) Error() string { return v.at.Format("15:04:05.000") + " " + v.msg }

func startLoad(t *testing.T, api *osProc, key string) *load {
	l := &load{api: api, key: key, phase: "warm-up", acked: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				l.postEvents(w, n)
				sleepCtx(ctx, 50*time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		for n := 0; ctx.Err() == nil; n++ {
			l.auctionAndClick(n)
			sleepCtx(ctx, 200*time.Millisecond)
		}
	})
	var once sync.Once
	l.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(l.stop)
	return l
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (l *load) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *load) currentPhase() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

func (l *load) record(msg string) {
	l.mu.Lock()
	l.bad = append(l.bad, violation{time.Now(), msg})
	l.mu.Unlock()
}

// judge records a violation for an answer out of bounds; ok is whether it
// was a success.
func (l *load) judge(what string, st int, body []byte, err error, took time.Duration, success int) bool {
	if strings.HasPrefix(what, "POST /v2/events") && (err == nil || !isRefused(err)) {
		l.mu.Lock()
		l.answers = append(l.answers, answer{at: time.Now(), status: st, took: took})
		l.mu.Unlock()
	}
	switch {
	case err != nil && isRefused(err):
		return false // the API is restarting: no answer at all, nothing promised
	case err != nil:
		l.record(fmt.Sprintf("%s: no answer after %s: %v", what, took.Round(time.Millisecond), err))
		return false
	case st == 401 || st == 403:
		l.record(fmt.Sprintf("%s: %d for a valid key: %s", what, st, body))
	case st >= 500 && st != 503:
		l.record(fmt.Sprintf("%s: %d: %s", what, st, body))
	case st != success && st != 503:
		l.record(fmt.Sprintf("%s: unexpected %d: %s", what, st, body))
	}
	if took > eventsBound {
		l.record(fmt.Sprintf("%s: answered %d after %s (bound %s)", what, st, took.Round(time.Millisecond), eventsBound))
	}
	return st == success
}

func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF")
}

func (l *load) postEvents(w, n int) {
	phase := l.currentPhase()
	var items, ids []string
	for i := range 10 {
		id := fmt.Sprintf("ft-%s/%d-%d-%d", phase, w, n, i)
		ids = append(ids, id)
		items = append(items, fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-%d","entity":{"type":"product","id":"P1"}}`, id, ts(time.Now()), i))
	}
	start := time.Now()
	st, b, err := l.api.call("POST", "/v2/events", l.key, `{"impressions":[`+strings.Join(items, ",")+`]}`, 2*eventsBound, nil)
	if l.judge("POST /v2/events", st, b, err, time.Since(start), 200) {
		l.mu.Lock()
		l.acked[phase] += len(ids)
		l.ids = append(l.ids, ids...)
		l.mu.Unlock()
	}
}

// auctionAndClick runs an auction for P1 and clicks its winner: each click
// is on a winner of its own, so each acknowledged click is one charge.
func (l *load) auctionAndClick(n int) {
	start := time.Now()
	st, b, err := l.api.call("POST", "/v2/auctions", l.key, `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["P1"]}}]}`, 2*eventsBound, nil)
	if !l.judge("POST /v2/auctions", st, b, err, time.Since(start), 201) {
		return
	}
	var out struct {
		Results []auResult `json:"results"`
	}
	if jsonErr := json.Unmarshal(b, &out); jsonErr != nil || len(out.Results) != 1 || len(out.Results[0].Winners) != 1 {
		return // no winner (state not loaded yet after a restart)
	}
	tok := out.Results[0].Winners[0].ResolvedBidID
	if _, err := bidtoken.DecodeUnverified(tok); err != nil {
		l.record("auction answered an undecodable token: " + err.Error())
		return
	}
	phase := l.currentPhase()
	id := fmt.Sprintf("ft-%s/click-%d", phase, n)
	body := fmt.Sprintf(`{"clicks":[{"id":%q,"occurredAt":%q,"opaqueUserId":"u-click","resolvedBidId":%q}]}`, id, ts(time.Now()), tok)
	// A click the client could not deliver is retried until it is
	// acknowledged (the same id: a retry, never a second click).
	for giveUp := time.Now().Add(2 * time.Minute); time.Now().Before(giveUp); {
		start = time.Now()
		st, b, err = l.api.call("POST", "/v2/events", l.key, body, 2*eventsBound, nil)
		if l.judge("POST /v2/events (click)", st, b, err, time.Since(start), 200) {
			l.mu.Lock()
			l.acked[phase]++
			l.ids = append(l.ids, id)
			l.nclicks++
			l.tokens = append(l.tokens, clickedToken{tok, time.Now()})
			l.mu.Unlock()
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.record("a click was not acknowledged in 2 minutes of retries")
}

func (l *load) ackedByPhase() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.acked)
}

func (l *load) ackedAll() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func (l *load) clicks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nclicks
}

// summary describes the /v2/events answers since a time: how many, how many
// 503, the slowest.
func (l *load) summary(since time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n, unavailable int
	var slowest time.Duration
	for _, a := range l.answers {
		if a.at.Before(since) {
			continue
		}
		n++
		if a.status == 503 {
			unavailable++
		}
		slowest = max(slowest, a.took)
	}
	return fmt.Sprintf("/v2/events: %d answers, %d of them 503, slowest %s", n, unavailable, slowest.Round(time.Millisecond))
}

func (l *load) violations(since time.Time) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []error
	for _, v := range l.bad {
		if !v.at.Before(since) {
			out = append(out, v)
		}
	}
	return out
}

// probes asks /readyz of each process four times a second and records every
// answer slower than readyzBound from a process that is running (not
// paused, not restarting).
type probes struct {
	stop func()
	mu   sync.Mutex
	bad  []violation
	took []answer
}

func startProbes(procs []*osProc) *probes {
	pr := &probes{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				st, _, err := p.get("/readyz", 5*time.Second)
				took := time.Since(start)
				if err == nil || !isRefused(err) {
					pr.mu.Lock()
					pr.took = append(pr.took, answer{start, st, took, p.name})
					pr.mu.Unlock()
				}
				if (err == nil || !isRefused(err)) && took > readyzBound {
					pr.mu.Lock()
					pr.bad = append(pr.bad, violation{start, fmt.Sprintf("%s /readyz answered %d after %s (bound %s): %v", p.name, st, took.Round(time.Millisecond), readyzBound, err)})
					pr.mu.Unlock()
				}
				sleepCtx(ctx, 250*time.Millisecond)
			}
		})
	}
	var once sync.Once
	pr.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	return pr
}

// notReady lists the /readyz answers of process name since a time that
// were not 200.
func (pr *probes) notReady(name string, since time.Time) []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []string
	for _, a := range pr.took {
		if a.proc == name && !a.at.Before(since) && a.status != 200 {
			out = append(out, fmt.Sprintf("%s %d", a.at.Format("15:04:05.000"), a.status))
		}
	}
	return out
}

// slowest is the slowest /readyz answer since a time.
func (pr *probes) slowest(since time.Time) time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var d time.Duration
	for _, a := range pr.took {
		if !a.at.Before(since) {
			d = max(d, a.took)
		}
	}
	return d
}

func (pr *probes) violations(since time.Time) []error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []error
	for _, v := range pr.bad {
		if !v.at.Before(since) {
			out = append(out, v)
		}
	}
	return out
}

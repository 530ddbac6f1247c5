package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/projections"
	exportsfile "github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the scenario test (sc*).

// scStack runs `endcap dev` (the whole system and its local stack) as a
// subprocess on its own data directory and free ports, with short projector
// flush and budget refresh intervals; it can be killed with SIGKILL and
// started again on the same data.
type scStack struct {
	devStack
	proc *devProc
}

// scRefresh is the budget cache refresh and projector flush interval given to
// the process (--budget-refresh, --projector-flush-interval).
const scRefresh = 200 * time.Millisecond

func (d *scStack) flags() []string {
	return []string{
		"--kafka-brokers", fmt.Sprintf("127.0.0.1:%d", d.kafka),
		"--clickhouse-addr", fmt.Sprintf("127.0.0.1:%d", d.ch),
		"--redis-addr", fmt.Sprintf("127.0.0.1:%d", d.redis),
		"--s3-endpoint", fmt.Sprintf("http://127.0.0.1:%d", d.s3),
		// The local S3 server's keys, which are not defaults: what endcap
		// dev gives its server, and the commands need to reach it.
		"--s3-access-key", localstack.DefaultS3AccessKey, "--s3-secret-key", localstack.DefaultS3SecretKey,
	}
}

// start runs `endcap dev` with the scenario's flags (short projector flush
// and budget refresh, raised rate limits, exports that recompute their
// whole window) and waits until it is ready.
func (d *scStack) start() {
	d.t.Helper()
	d.extra = []string{"--budget-refresh", scRefresh.String(), "--projector-flush-interval", scRefresh.String(),
		"--rate-limit-default", "5000/1s", "--rate-limit-catalog", "5000/1s", "--export-max-staleness", "0s"}
	d.proc = d.devStack.start()
}

// kill sends SIGKILL to the endcap process (its stack's children die with
// it: PR_SET_PDEATHSIG) and waits for it to exit.
func (d *scStack) kill() {
	d.t.Helper()
	if err := d.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	<-d.proc.done
	// The stack's children get SIGKILL from the kernel as their parent dies,
	// but may still be exiting: a start before they released their ports
	// fails ("port … already in use by a process that is not part of this
	// stack"). Wait for the ports, as a user restarting by hand would.
	deadline := time.Now().Add(15 * time.Second)
	for _, port := range []int{d.http, d.kafka, d.ch, d.chHTTP, d.redis, d.s3} {
		for {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				ln.Close()
				break
			}
			if time.Now().After(deadline) {
				d.t.Fatalf("port %d still in use 15s after the kill: %v", port, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// cli runs `endcap <args> <stack flags>` and returns its standard output.
func (d *scStack) cli(args ...string) []byte {
	d.t.Helper()
	cmd := exec.Command(d.bin, append(args, d.flags()...)...)
	cmd.Env = devEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		d.t.Fatalf("endcap %s: %v\n%s%s", strings.Join(args, " "), err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

func (d *scStack) call(method, path, key, body string) (int, []byte) {
	d.t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", d.http, path), strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	checkTimestamps(d.t, method+" "+path, b, path, body)
	return resp.StatusCode, b
}

func (d *scStack) must(method, path, key, body string, want int) []byte {
	d.t.Helper()
	st, b := d.call(method, path, key, body)
	if st != want {
		d.t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, b)
	}
	return b
}

// scZone returns an IANA zone (Etc/GMT±N) in which it is now between 22:00
// and 22:59 local time. The scenario then stays inside one local day (at
// least an hour to midnight), and budget pacing allows at least
// (22 h + 1 h) / 24 h = 95.8 % of a daily budget (docs/design/auction-ranking.md,
// Budget): nothing in this test is paced.
func scZone(now time.Time) (string, *time.Location) {
	off := (22 - now.UTC().Hour() + 24) % 24 // local = UTC + off hours
	if off > 14 {
		off -= 24 // Etc zones run from UTC-12 to UTC+14
	}
	loc := time.FixedZone("scenario", off*3600)
	switch {
	case off == 0:
		return "UTC", loc
	case off > 0:
		return fmt.Sprintf("Etc/GMT-%d", off), loc // POSIX sign: Etc/GMT-3 is UTC+3
	default:
		return fmt.Sprintf("Etc/GMT+%d", -off), loc
	}
}

// scNanos converts a JSON decimal amount ("0.00234567") to 10⁻⁹ currency
// units exactly (no float).
func scNanos(t *testing.T, n json.Number) int64 {
	t.Helper()
	s := string(n)
	if strings.ContainsAny(s, "eE-") {
		t.Fatalf("amount %q is not a plain positive decimal", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 {
		t.Fatalf("amount %q has more than 9 decimals", s)
	}
	frac += strings.Repeat("0", 9-len(frac))
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("amount %q: %v %v", s, err1, err2)
	}
	return w*1_000_000_000 + f
}

// scEvent is one event of the scenario, kept as its JSON item.
type scEvent struct {
	kind string // impressions, clicks, purchases
	item string
}

func scBody(evs []scEvent) string {
	parts := map[string][]string{}
	for _, e := range evs {
		parts[e.kind] = append(parts[e.kind], e.item)
	}
	var fields []string
	for _, k := range []string{"impressions", "clicks", "purchases"} {
		if len(parts[k]) > 0 {
			fields = append(fields, fmt.Sprintf("%q:[%s]", k, strings.Join(parts[k], ",")))
		}
	}
	return "{" + strings.Join(fields, ",") + "}"
}

// scAttributed is one expected row of attributed_purchases and of the daily file.
type scAttributed struct {
	purchase    string
	item        int32
	product     string
	quantity    int64
	unitMicros  int64
	amount      int64
	amountText  string
	reason      string
	score       float64
	window      int64
	interaction string // event id of the credited interaction
	kind        string
	campaign    string
	vendor      string
	rank        int32
	chargeType  string
}

// TestScenario runs one small marketplace end to end through `endcap dev`:
// catalog, campaigns and a reserve price; auctions whose winners and prices
// are computed by hand from docs/design/auction-ranking.md; impressions, clicks and
// purchases on those winners, with duplicate ids, retried requests and a
// shuffled order, split across a SIGKILL of the process and its restart on
// the same data. It then checks charges, Redis spend, attribution, the
// vendor-charges endpoint and the daily scored-attribution file against
// figures computed by hand in the comments, and against each other. A
// campaign with a small daily budget stops winning once the real charge
// pipeline has spent it.
func TestScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as a subprocess")
	}
	testenv.Get(t) // skips or fails like the other integration tests when the stack is not installed
	began := time.Now()
	d := &scStack{devStack: *newDevStack(t)}
	d.start()
	t.Logf("endcap dev ready after %s", time.Since(began).Round(time.Millisecond))

	// ---- Marketplace, reserve and keys through the admin command. ----
	tz, loc := scZone(time.Now())
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(d.cli("admin", "marketplace", "create", "--name", "Scenario", "--currency", "USD", "--timezone", tz), &m); err != nil || m.ID == "" {
		t.Fatalf("marketplace create: %v %+v", err, m)
	}
	mp := m.ID
	// Reserve: CPC 0.10 = 100,000 µ a click, CPM 1.00 = 1,000,000 µ a thousand impressions.
	d.cli("admin", "marketplace", "set-reserve", "--marketplace", mp, "--cpc", "0.10", "--cpm", "1.00")
	key := func(typ string) string {
		var k struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(d.cli("admin", "key", "create", "--marketplace", mp, "--type", typ), &k); err != nil || k.Key == "" {
			t.Fatalf("key create %s: %v", typ, err)
		}
		return k.Key
	}
	mkKey, advKey := key("marketplace"), key("advanced")
	// The keys reach the API's view through the accounts log: wait for both
	// (the reserve, written before them on the same log, is then there too).
	testenv.Eventually(t, 20*time.Second, func() error {
		if st, b := d.call("POST", "/v2/events", mkKey, `{"impressions":[]}`); st != 200 {
			return fmt.Errorf("marketplace key: %d %s", st, b)
		}
		if st, b := d.call("PUT", "/public/v1/catalog-search-service/catalogs/vendors", advKey,
			`{"vendors":[{"id":"v1","name":"V1"},{"id":"v2","name":"V2"},{"id":"v3","name":"V3"},{"id":"v4","name":"V4"},{"id":"v5","name":"V5"},{"id":"v6","name":"V6"}]}`); st != 200 {
			return fmt.Errorf("advanced key: %d %s", st, b)
		}
		return nil
	})

	// ---- Catalog and campaigns. ----
	// Quality: P1 0.5, P2 0.9, P3 0.8; P4 and P5 have none (1).
	d.must("PUT", "/public/v1/catalog-search-service/catalogs/products", advKey, `{"products":[
		{"id":"P1","name":"P1","vendors":["v1","v3"],"active":true,"quality_score":0.5},
		{"id":"P2","name":"P2","vendors":["v2"],"active":true,"quality_score":0.9},
		{"id":"P3","name":"P3","vendors":["v4","v6"],"active":true,"quality_score":0.8},
		{"id":"P4","name":"P4","vendors":["v5"],"active":true},
		{"id":"P5","name":"P5","vendors":["v1"],"active":true}]}`, 200)
	names := map[string]string{}
	camp := func(name, vendor, charge, budgets, product, bid string) string {
		var c struct {
			ID string `json:"id"`
		}
		b := d.must("POST", cpVendor(vendor), advKey, fmt.Sprintf(`{"name":%q,"type":"listings","chargeType":%q,%s,"startDate":"2020-01-01T00:00:00Z"}`, name, charge, budgets), 201)
		if err := json.Unmarshal(b, &c); err != nil || c.ID == "" {
			t.Fatalf("campaign %s: %s", name, b)
		}
		d.must("POST", cpBids(c.ID), advKey, fmt.Sprintf(`{"targetType":"product","target":%q,"bidAmount":%s}`, product, bid), 201)
		names[c.ID] = name
		return c.ID
	}
	const big = `"dailyBudget":1000`
	c1 := camp("c1", "v1", "CPC", big, "P1", "1.00")
	c2 := camp("c2", "v2", "CPC", big, "P2", "0.80")
	camp("c3", "v3", "CPC", big, "P1", "0.60")
	c4 := camp("c4", "v4", "CPM", big, "P3", "4.321987")
	camp("c6", "v6", "CPC", big, "P3", "0.234567")
	cB := camp("cB", "v5", "CPC", `"dailyBudget":0.35`, "P4", "0.50")
	camp("c5", "v5", "CPC", big, "P4", "0.09")

	type winner struct {
		product, campaign, token string
		rank                     int
		price                    int64
		charge                   bidtoken.ChargeType
	}
	auction := func(products string, slots int) []winner {
		t.Helper()
		b := d.must("POST", "/v2/auctions", mkKey, fmt.Sprintf(`{"auctions":[{"type":"listings","slots":%d,"products":{"ids":[%s]}}]}`, slots, products), 201)
		var out struct {
			Results []auResult `json:"results"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 || out.Results[0].Error {
			t.Fatalf("auction: %v %s", err, b)
		}
		var ws []winner
		for _, w := range out.Results[0].Winners {
			c, err := bidtoken.DecodeUnverified(w.ResolvedBidID)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, winner{w.ID, w.CampaignID, w.ResolvedBidID, w.Rank, c.PriceMicros, c.ChargeType})
		}
		return ws
	}

	// ---- Budget: cB stops winning once the charge pipeline has used its daily budget. ----
	// Auction B over P4, 1 slot. cB bids 0.50 CPC; c5 bids 0.09 CPC, under
	// the CPC reserve 0.10: not eligible. cB has no competitor and pays the
	// reserve, 100,000 µ a click. Its daily budget is 350,000 µ. After k
	// charged clicks its day spend is 100,000 k: 0, 100,000, 200,000 and
	// 300,000 are under both the budget and the pacing allowance (≥ 95.8 % of
	// it, 335,416 µ, see scZone), so cB wins 4 auctions. The fourth click
	// would take its spend to 400,000, over the budget: it is refused
	// (docs/design/budgets.md, "The cap"), spend stays at 300,000, and the refusal
	// tells the auction that cB is at its budget: with c5 under the reserve
	// the fifth auction has no winner. Each click waits for its spend (or its
	// refusal) in Redis and for two cache refreshes before the next auction,
	// so nothing is served on stale spend.
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.redis)})
	defer rdb.Close()
	today := spend.DayOf(time.Now(), loc)
	// spendOf reads a field of a campaign's spend hash: today's spend
	// (dayF), its total (spend.TotalField), or a refusal hint ("!" and
	// either).
	dayF := spend.DayField(today)
	spendOf := func(campaign, field string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		n, err := rdb.HGet(ctx, spend.SpendKey(mp, campaign), field).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("redis HGET %s %s: %v", spend.SpendKey(mp, campaign), field, err)
		}
		return n
	}
	budgetWins := 0
	for budgetWins < 10 {
		ws := auction(`"P4"`, 1)
		if len(ws) == 0 {
			break
		}
		if len(ws) != 1 || ws[0].campaign != cB || ws[0].price != 100_000 || ws[0].charge != bidtoken.CPC {
			t.Fatalf("budget auction %d: %+v", budgetWins+1, ws)
		}
		budgetWins++
		d.must("POST", "/v2/events", mkKey, fmt.Sprintf(`{"clicks":[{"id":"bud-%d","occurredAt":%q,"opaqueUserId":"u-budget","resolvedBidId":%q}]}`,
			budgetWins, ts(time.Now()), ws[0].token), 200)
		want, field := int64(budgetWins)*100_000, dayF
		if want > 350_000 {
			field = "!" + dayF // refused: the hint holds the spend it would have made
		}
		testenv.Eventually(t, 10*time.Second, func() error {
			if got := spendOf(cB, field); got != want {
				return fmt.Errorf("cB day spend (%s) %d, want %d", field, got, want)
			}
			return nil
		})
		time.Sleep(2*scRefresh + 100*time.Millisecond)
	}
	if budgetWins != 4 {
		t.Fatalf("cB won %d budget auctions, want 4 (daily budget 350,000 µ at 100,000 µ a click)", budgetWins)
	}

	// ---- 24 listings auctions over P1, P2, P3 (3 slots), all alike. ----
	// Quality ppm: P1 500,000, P2 900,000, P3 800,000. Normalised bids
	// (CPC × 10): c1 10,000,000, c2 8,000,000, c3 6,000,000, c6 2,345,670;
	// c4 (CPM) 4,321,987. Scores (normalised × quality):
	//   c2 on P2 8,000,000 × 900,000 = 7,200,000,000,000
	//   c1 on P1 10,000,000 × 500,000 = 5,000,000,000,000
	//   c4 on P3 4,321,987 × 800,000 = 3,457,589,600,000
	//   c3 on P1 6,000,000 × 500,000 = 3,000,000,000,000
	//   c6 on P3 2,345,670 × 800,000 = 1,876,536,000,000
	// Order c2, c1, c4, c3, c6. Winners and prices (second price):
	//   rank 1 c2@P2: competitor c1, ⌈5.0e12 / (10 × 900,000)⌉ = ⌈555,555.6⌉ = 555,556 µ a click
	//   rank 2 c1@P1: competitor c4 (P3 not yet won), ⌈3,457,589,600,000 / (10 × 500,000)⌉ = ⌈691,517.92⌉ = 691,518 µ a click
	//   rank 3 c4@P3: c3 is skipped (P1 won above), competitor c6 (a bid on c4's own product counts),
	//          ⌈1,876,536,000,000 / (1 × 800,000)⌉ = 2,345,670 µ a thousand impressions
	//          (one impression: 2,345 µ + 670/1000 µ)
	// All above the reserves and at most the bids. c3 and c6 never win.
	const nAuctions = 24
	want := []winner{
		{product: "P2", campaign: c2, rank: 1, price: 555_556, charge: bidtoken.CPC},
		{product: "P1", campaign: c1, rank: 2, price: 691_518, charge: bidtoken.CPC},
		{product: "P3", campaign: c4, rank: 3, price: 2_345_670, charge: bidtoken.CPM},
	}
	tokens := make([][3]string, nAuctions+1) // tokens[i][r-1]: auction i (1-based), rank r
	for i := 1; i <= nAuctions; i++ {
		ws := auction(`"P1","P2","P3"`, 3)
		if len(ws) != 3 {
			t.Fatalf("auction %d: %d winners %+v", i, len(ws), ws)
		}
		for r, w := range ws {
			tok := w.token
			w.token = ""
			if w != want[r] {
				t.Fatalf("auction %d rank %d: %s@%s rank %d price %d %v, want %s@%s rank %d price %d %v", i, r+1,
					w.product, names[w.campaign], w.rank, w.price, w.charge, want[r].product, names[want[r].campaign], want[r].rank, want[r].price, want[r].charge)
			}
			tokens[i][r] = tok
		}
	}

	// ---- Events. ----
	// Times: all after the auctions (purchases must not precede an auction),
	// a few seconds ahead of now at most (the API allows 5 minutes), inside
	// one local day.
	tE := time.Now().UTC().Truncate(time.Millisecond).Add(time.Second)
	at := func(i int, ms int) string { return ts(tE.Add(time.Duration(i*200+ms) * time.Millisecond)) }
	var events []scEvent
	interaction := func(kind, id string, i int, ms int, tok string) {
		events = append(events, scEvent{kind, fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-%d","resolvedBidId":%q}`, id, at(i, ms), i, tok)})
	}
	for i := 1; i <= nAuctions; i++ {
		for r := 1; r <= 3; r++ {
			interaction("impressions", fmt.Sprintf("imp-%d-%d", i, r), i, r, tokens[i][r-1])
		}
		if i <= 10 {
			interaction("clicks", fmt.Sprintf("clk-%d-1", i), i, 50, tokens[i][0])
		}
		if i <= 6 {
			interaction("clicks", fmt.Sprintf("clk-%d-2", i), i, 60, tokens[i][1])
		}
	}
	interaction("clicks", "clk-2-1-again", 2, 80, tokens[2][0])      // the same ad clicked twice: counted, not charged again
	interaction("clicks", "clk-4-3", 4, 70, tokens[4][2])            // a click on a CPM winner: not charged (kind)
	interaction("impressions", "imp-5-3-again", 5, 90, tokens[5][2]) // an impression rendered twice: charged once
	tP := tE.Add(6 * time.Second)
	purchase := func(id string, user, k int, items string) {
		events = append(events, scEvent{"purchases", fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-%d","items":[%s]}`,
			id, ts(tP.Add(time.Duration(k)*time.Second)), user, items)})
	}
	purchase("pur-1", 1, 0, `{"productId":"P2","unitPrice":10.000001,"quantity":2},{"productId":"P1","unitPrice":5.5},
		{"productId":"P5","unitPrice":3.333333,"vendorId":"v1"},{"productId":"PX","unitPrice":1}`)
	purchase("pur-7", 7, 1, `{"productId":"P1","unitPrice":4,"vendorId":"v2"}`)
	purchase("pur-8", 8, 2, `{"productId":"P5","unitPrice":3}`)
	purchase("pur-12", 12, 3, `{"productId":"P3","unitPrice":7.25,"quantity":3},{"productId":"P2","unitPrice":2}`)

	// Shuffled (fixed seed) into requests of 7 events; one request carries an
	// event id twice.
	rng := rand.New(rand.NewPCG(5, 2026))
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	var requests []string
	for i := 0; i < len(events); i += 7 {
		batch := slices.Clone(events[i:min(i+7, len(events))])
		if i == 0 {
			batch = append(batch, batch[0]) // a duplicate id inside one request
		}
		requests = append(requests, scBody(batch))
	}
	post := func(body string) {
		t.Helper()
		d.must("POST", "/v2/events", mkKey, body, 200)
	}
	half := len(requests) / 2
	for _, r := range requests[:half-1] {
		post(r)
	}
	// Let the projectors fold part of it, then send one more request and
	// SIGKILL the process at once: some events are folded (and committed),
	// some are acknowledged to the client and not folded yet.
	pre, err := clickhouse.Open(clickhouse.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.ch), Database: "endcap", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	folded := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var n uint64
		if err := pre.QueryRow(ctx, "SELECT count() FROM interactions_raw WHERE marketplace_id = ? AND startsWith(event_id, 'bud-') = 0", mp).Scan(&n); err != nil {
			return 0
		}
		return n
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if folded() == 0 {
			return fmt.Errorf("nothing of the first requests folded yet")
		}
		return nil
	})
	before := folded()
	pre.Close()
	post(requests[half-1])
	d.kill()
	t.Logf("killed with SIGKILL after %d of %d requests (%d of their interactions folded before the last one); restarting", half, len(requests), before)
	restart := time.Now()
	d.start()
	t.Logf("restarted in %s", time.Since(restart).Round(time.Millisecond))
	// The client retries every request of the first half (it cannot know
	// which were folded), sends the second half, then retries two of it.
	for _, r := range requests[:half] {
		post(r)
	}
	for _, r := range requests[half:] {
		post(r)
	}
	post(requests[len(requests)-1])
	post(requests[half])

	// ---- Expected figures. ----
	// Charges per campaign (docs/design/charges.md: a CPC winner is charged its
	// click, a CPM winner its impression, each winner at most once per kind):
	//   c2: clk-1-1 … clk-10-1: 10 × 555,556 = 5,555,560 µ (clk-2-1-again: same winner, not charged)
	//   c1: clk-1-2 … clk-6-2: 6 × 691,518 = 4,149,108 µ (impressions of a CPC winner: not charged)
	//   c4: imp-1-3 … imp-24-3: 24 × (2,345 µ + 670 sub-µ) = 56,280 µ + 16,080 sub-µ = 56,296.080 µ exact
	//       (imp-5-3-again: same winner; clk-4-3: a click on a CPM winner)
	//   cB: bud-1 … bud-3: 3 × 100,000 = 300,000 µ (bud-4 refused: daily_budget)
	// 43 charges; 10,060,964.080 µ in all. Redis spend moves by amount_micros:
	// c4's spend is 56,280 µ.
	type chargeSum struct {
		count          uint64
		micros, subs   int64
		product, vndr  string
		perChargeNanos int64
	}
	wantCharges := map[string]chargeSum{
		c2: {10, 5_555_560, 0, "P2", "v2", 555_556_000},
		c1: {6, 4_149_108, 0, "P1", "v1", 691_518_000},
		c4: {24, 56_280, 16_080, "P3", "v4", 2_345_670},
		cB: {3, 300_000, 0, "P4", "v5", 100_000_000},
	}
	// Interactions: 72 + 1 impressions, 10 + 6 + 2 + 4 clicks = 95 rows.
	const wantInteractions = 95
	// Attribution (docs/design/attribution.md), per purchased item; windows: click
	// 14 days (1,209,600 s), impression 1 day (86,400 s), halo on:
	//   pur-1 (u-1: impressions of all 3 winners of auction 1, clicks clk-1-1 on c2@P2 and clk-1-2 on c1@P1)
	//     #0 P2 × 2 at 10.000001: same product; the click clk-1-1 (c2) beats the impression imp-1-1 → product_click 1
	//     #1 P1 × 1 at 5.50: clk-1-2 (c1) → product_click 1
	//     #2 P5 (vendor v1, given) × 1 at 3.333333: no ad of P5; halo with c1 (vendor v1): its click clk-1-2 → halo_click 0.25
	//     #3 PX: not in the catalog, no vendor → nothing qualifies (reason none: not in attributed_purchases)
	//   pur-7 (u-7: impressions of auction 7, clk-7-1 on c2@P2; no click on P1 as 7 > 6)
	//     #0 P1 at 4.00, vendorId v2: c2's click is a halo match (vendor v2), but the same-product
	//        impression imp-7-2 (c1) comes first (rule 1 before rule 2) → product_impression 0.5
	//   pur-8 (u-8: impressions of auction 8, clk-8-1 on c2@P2)
	//     #0 P5 at 3.00, no vendorId: the catalog's only vendor of P5 is v1 → halo with c1, only its
	//        impression imp-8-2 → halo_impression 0.125 (c2's click is vendor v2: no match)
	//   pur-12 (u-12: impressions only, 12 > 10)
	//     #0 P3 × 3 at 7.25: imp-12-3 (c4) → product_impression 0.5
	//     #1 P2 at 2.00: imp-12-1 (c2) → product_impression 0.5
	// 7 attributed items, scores sum to 3.875, amounts to 59,583,335 µ.
	const clickWin, impWin = 1_209_600, 86_400
	wantAttr := []scAttributed{
		{"pur-1", 0, "P2", 2, 10_000_001, 20_000_002, "20.000002", "product_click", 1, clickWin, "clk-1-1", "click", c2, "v2", 1, "CPC"},
		{"pur-1", 1, "P1", 1, 5_500_000, 5_500_000, "5.5", "product_click", 1, clickWin, "clk-1-2", "click", c1, "v1", 2, "CPC"},
		{"pur-1", 2, "P5", 1, 3_333_333, 3_333_333, "3.333333", "halo_click", 0.25, clickWin, "clk-1-2", "click", c1, "v1", 2, "CPC"},
		{"pur-7", 0, "P1", 1, 4_000_000, 4_000_000, "4", "product_impression", 0.5, impWin, "imp-7-2", "impression", c1, "v1", 2, "CPC"},
		{"pur-8", 0, "P5", 1, 3_000_000, 3_000_000, "3", "halo_impression", 0.125, impWin, "imp-8-2", "impression", c1, "v1", 2, "CPC"},
		{"pur-12", 0, "P3", 3, 7_250_000, 21_750_000, "21.75", "product_impression", 0.5, impWin, "imp-12-3", "impression", c4, "v4", 3, "CPM"},
		{"pur-12", 1, "P2", 1, 2_000_000, 2_000_000, "2", "product_impression", 0.5, impWin, "imp-12-1", "impression", c2, "v2", 1, "CPC"},
	}

	conn, err := clickhouse.Open(clickhouse.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.ch), Database: "endcap", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	query := func(q string, args ...any) ([][]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][]string
		for rows.Next() {
			var a, b, c, e, f string
			ptrs := []any{&a, &b, &c, &e, &f}
			if err := rows.Scan(ptrs[:len(rows.Columns())]...); err != nil {
				return nil, err
			}
			out = append(out, []string{a, b, c, e, f}[:len(rows.Columns())])
		}
		return out, rows.Err()
	}
	chargeRows := func() (map[string]chargeSum, error) {
		rows, err := query(`SELECT toString(campaign_id), toString(count()), toString(sum(amount_micros)), toString(sum(amount_sub_micros))
			FROM charges WHERE marketplace_id = ? GROUP BY campaign_id`, mp)
		if err != nil {
			return nil, err
		}
		got := map[string]chargeSum{}
		for _, r := range rows {
			n, _ := strconv.ParseUint(r[1], 10, 64)
			mi, _ := strconv.ParseInt(r[2], 10, 64)
			su, _ := strconv.ParseInt(r[3], 10, 64)
			got[r[0]] = chargeSum{count: n, micros: mi, subs: su}
		}
		return got, nil
	}
	attrRows := func() ([]string, error) {
		rows, err := query(`SELECT purchase_event_id, toString(item_index), concat(reason, ' ', toString(score), ' ', interaction_event_id, ' ', campaign_id),
			toString(amount_micros), product_id FROM attributed_purchases WHERE marketplace_id = ? ORDER BY purchased_at, purchase_event_id, item_index`, mp)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range rows {
			out = append(out, strings.Join(r, " "))
		}
		return out, nil
	}
	var wantAttrRows []string
	for _, a := range wantAttr {
		wantAttrRows = append(wantAttrRows, fmt.Sprintf("%s %d %s %s %s %s %d %s", a.purchase, a.item, a.reason,
			strconv.FormatFloat(a.score, 'f', -1, 64), a.interaction, a.campaign, a.amount, a.product))
	}
	settle := time.Now()
	testenv.Eventually(t, 40*time.Second, func() error {
		got, err := chargeRows()
		if err != nil {
			return err
		}
		for c, w := range wantCharges {
			if g := got[c]; g.count != w.count || g.micros != w.micros || g.subs != w.subs {
				return fmt.Errorf("charges of %s: %d, %d µ + %d sub-µ; want %d, %d + %d", names[c], g.count, g.micros, g.subs, w.count, w.micros, w.subs)
			}
		}
		if len(got) != len(wantCharges) {
			return fmt.Errorf("charges of %d campaigns, want %d: %v", len(got), len(wantCharges), got)
		}
		n, err := query(`SELECT toString(count()) FROM interactions WHERE marketplace_id = ?`, mp)
		if err != nil {
			return err
		}
		if n[0][0] != strconv.Itoa(wantInteractions) {
			return fmt.Errorf("%s interactions, want %d", n[0][0], wantInteractions)
		}
		a, err := attrRows()
		if err != nil {
			return err
		}
		if strings.Join(a, "\n") != strings.Join(wantAttrRows, "\n") {
			return fmt.Errorf("attributed purchases\n%s\nwant\n%s", strings.Join(a, "\n"), strings.Join(wantAttrRows, "\n"))
		}
		return nil
	})
	t.Logf("charges, interactions and attribution settled %s after the last request", time.Since(settle).Round(time.Millisecond))
	// Nothing more may come: wait well past a flush and look again.
	time.Sleep(5 * scRefresh)

	// ---- Charges in ClickHouse. ----
	got, err := chargeRows()
	if err != nil {
		t.Fatal(err)
	}
	for c, w := range wantCharges {
		if g := got[c]; g.count != w.count || g.micros != w.micros || g.subs != w.subs {
			t.Errorf("charges of %s: %d, %d µ + %d sub-µ; want %d, %d + %d", names[c], g.count, g.micros, g.subs, w.count, w.micros, w.subs)
		}
	}
	if len(got) != len(wantCharges) {
		t.Errorf("charges of %d campaigns, want %d", len(got), len(wantCharges))
	}
	// Every charge row is a charged interaction with the same id.
	if r, err := query(`SELECT toString(countIf(charged = 1)), toString(count()) FROM interactions WHERE marketplace_id = ?`, mp); err != nil || r[0][0] != "43" || r[0][1] != "95" {
		t.Errorf("interactions charged/all: %v %v, want 43/95", r, err)
	}
	if r, err := query(`SELECT event_id, refused_reason FROM interactions WHERE marketplace_id = ? AND campaign_id = ? AND charged = 0`, mp, cB); err != nil ||
		len(r) != 1 || r[0][0] != "bud-4" || r[0][1] != "daily_budget" {
		t.Errorf("cB's uncharged interactions: %v %v, want bud-4 refused for its daily budget", r, err)
	}
	if r, err := query(`SELECT toString(count()) FROM charges WHERE marketplace_id = ? AND interaction_id NOT IN
		(SELECT interaction_id FROM interactions WHERE marketplace_id = ? AND charged = 1)`, mp, mp); err != nil || r[0][0] != "0" {
		t.Errorf("charges without a charged interaction: %v %v", r, err)
	}

	// ---- Redis spend: day (today, local) and total, per campaign = Σ amount_micros. ----
	for c, w := range wantCharges {
		day, total := spendOf(c, dayF), spendOf(c, spend.TotalField)
		if day != w.micros || total != w.micros {
			t.Errorf("Redis spend of %s: day %d, total %d; want %d", names[c], day, total, w.micros)
		}
		fields := int64(4) // today's, this week's, this month's and the total
		if c == cB {
			fields = 5 // and cB's refusal of today
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n, err := rdb.HLen(ctx, spend.SpendKey(mp, c)).Result()
		cancel()
		if err != nil || n != fields {
			t.Errorf("%s has %d fields (%v), want %d", spend.SpendKey(mp, c), n, err, fields)
		}
	}
	// cB: 300,000 spent of a 350,000 daily budget; its fourth click (to 400,000) refused.
	if spent, refused := spendOf(cB, dayF), spendOf(cB, "!"+dayF); spent != 300_000 || refused != 400_000 {
		t.Errorf("cB spent %d µ (refused at %d), want 300,000 (400,000)", spent, refused)
	}
	if ws := auction(`"P4"`, 1); len(ws) != 0 {
		t.Errorf("cB wins again after its daily budget is used: %+v", ws)
	}

	// ---- Vendor charges endpoint, window from before the test to after the last event. ----
	start := began.UTC().Add(-time.Minute).Truncate(time.Second)
	end := tP.Add(time.Minute).Truncate(time.Second)
	q := url.Values{"start_date": {start.Format(time.RFC3339)}, "end_date": {end.Format(time.RFC3339)}}
	body := d.must("GET", "/public/v1/billing-service/vendor-charges?"+q.Encode(), advKey, "", 200)
	var vc struct {
		CurrencyCode string `json:"currencyCode"`
		HasMore      bool   `json:"hasMore"`
		Data         []struct {
			InteractionID    string      `json:"interactionId"`
			CampaignID       string      `json:"campaignId"`
			ProductID        string      `json:"productId"`
			VendorID         string      `json:"vendorId"`
			ExternalVendorID string      `json:"externalVendorId"`
			Amount           json.Number `json:"amount"`
		} `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&vc); err != nil {
		t.Fatalf("vendor charges: %v", err)
	}
	if vc.CurrencyCode != "USD" || vc.HasMore || len(vc.Data) != 43 {
		t.Fatalf("vendor charges: currency %s, hasMore %v, %d entries; want USD, false, 43", vc.CurrencyCode, vc.HasMore, len(vc.Data))
	}
	vcSum := map[string]int64{}
	vcCount := map[string]uint64{}
	var vcTotal int64
	for _, e := range vc.Data {
		w, ok := wantCharges[e.CampaignID]
		n := scNanos(t, e.Amount)
		if !ok || e.ProductID != w.product || e.ExternalVendorID != w.vndr || e.VendorID != vendorid.String(mp, w.vndr) || n != w.perChargeNanos {
			t.Errorf("vendor charge %+v: want campaign of %v, product %s, vendor %s, %d nano", e, names, w.product, w.vndr, w.perChargeNanos)
		}
		vcSum[e.CampaignID] += n
		vcCount[e.CampaignID]++
		vcTotal += n
	}
	for c, w := range wantCharges {
		// Exact: Σ amount = amount_micros × 1000 + amount_sub_micros (nano-units).
		if vcCount[c] != w.count || vcSum[c] != w.micros*1000+w.subs {
			t.Errorf("vendor charges of %s: %d entries, %d nano; want %d, %d", names[c], vcCount[c], vcSum[c], w.count, w.micros*1000+w.subs)
		}
	}
	// 5.55556 + 4.149108 + 0.05629608 + 0.3 = 10.06096408 currency units.
	if vcTotal != 10_060_964_080 {
		t.Errorf("vendor charges total %d nano, want 10,060,964,080", vcTotal)
	}

	// ---- Attribution: ClickHouse rows and the spend behind them. ----
	// Credited interactions: clk-1-1 (charged 555,556), clk-1-2 (691,518,
	// credited twice, counted once), imp-7-2, imp-8-2, imp-12-1 (CPC
	// impressions: not charged), imp-12-3 (charged 2,345 µ + 670 sub-µ).
	spendRows, err := query(`SELECT campaign_id, toString(sum(amount_micros) + intDiv(sum(amount_sub_micros), 1000)) FROM charges
		WHERE marketplace_id = ? AND interaction_id IN (SELECT interaction_id FROM attributed_purchases_raw FINAL
			WHERE marketplace_id = ? AND attributed = 1) GROUP BY campaign_id ORDER BY campaign_id`, mp, mp)
	if err != nil {
		t.Fatal(err)
	}
	wantSpend := [][]string{{c1, "691518"}, {c2, "555556"}, {c4, "2345"}}
	sort.Slice(wantSpend, func(i, j int) bool { return wantSpend[i][0] < wantSpend[j][0] })
	if fmt.Sprint(spendRows) != fmt.Sprint(wantSpend) {
		t.Errorf("spend behind attributed purchases %v, want %v", spendRows, wantSpend)
	}
	if r, err := query(`SELECT toString(count()), toString(sum(score)), toString(sum(amount_micros)) FROM attributed_purchases WHERE marketplace_id = ?`, mp); err != nil ||
		fmt.Sprint(r) != "[[7 3.875 59583335]]" {
		t.Errorf("attributed items, score, amount: %v %v; want 7, 3.875, 59583335", r, err)
	}
	if r, err := query(`SELECT toString(count()) FROM attributed_purchases_raw FINAL WHERE marketplace_id = ? AND attributed = 0
		AND purchase_event_id = 'pur-1' AND item_index = 3 AND reason = 'none'`, mp); err != nil || r[0][0] != "1" {
		t.Errorf("pur-1 item 3 (PX) must be computed and not attributed: %v %v", r, err)
	}

	// ---- The daily scored-attribution file, produced by the admin command. ----
	date := time.Now().In(loc).Format(time.DateOnly)
	var res scoredfiles.Result
	if err := json.Unmarshal(d.cli("admin", "report", "scored-attribution", "--marketplace", mp, "--date", date), &res); err != nil {
		t.Fatal(err)
	}
	if res.Rows != int64(len(wantAttr)) || res.Final {
		t.Fatalf("report: %+v, want %d rows, provisional", res, len(wantAttr))
	}
	var list struct {
		Files []sfFile `json:"files"`
	}
	if err := json.Unmarshal(d.must("GET", sfPath+"?report_date="+date, advKey, "", 200), &list); err != nil || len(list.Files) != 1 {
		t.Fatalf("file list: %v %+v", err, list)
	}
	st, data := sfDownload(t, list.Files[0].FileURL)
	if st != 200 {
		t.Fatalf("download: %d %.200s", st, data)
	}
	rd := parquet.NewGenericReader[scoredfiles.Record](bytes.NewReader(data))
	recs := make([]scoredfiles.Record, rd.NumRows())
	if n, err := rd.Read(recs); n != len(recs) || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("read %d of %d rows: %v", n, len(recs), err)
	}
	if len(recs) != len(wantAttr) {
		t.Fatalf("file has %d rows, want %d", len(recs), len(wantAttr))
	}
	dayNum := int32(time.Date(tE.In(loc).Year(), tE.In(loc).Month(), tE.In(loc).Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400)
	var fileScore float64
	var fileAmount int64
	for i, r := range recs {
		w := wantAttr[i]
		kind := records.KindClick
		if w.kind == "impression" {
			kind = records.KindImpression
		}
		iid := projections.InteractionID(mp, kind, w.interaction).String()
		ok := r.MarketplaceID == mp && r.DayLocal == dayNum && r.PurchaseEventID == w.purchase && r.ItemIndex == w.item &&
			r.ProductID == w.product && r.Quantity == w.quantity && r.CurrencyCode == "USD" && r.UnitPriceMicros == w.unitMicros &&
			r.AmountMicros == w.amount && r.Amount == w.amountText && r.Reason == w.reason && r.Score == w.score &&
			r.WindowSeconds == w.window && r.InteractionID == iid && r.InteractionKind == w.kind && r.InteractionEventID == w.interaction &&
			r.Rank == w.rank && r.AdFormat == "listings" && r.CampaignID == w.campaign && r.VendorID == w.vendor &&
			r.EntityType == "product" && r.ChargeType == w.chargeType
		if w.kind == "click" || w.interaction == "imp-12-3" {
			// Charged interactions: the same id is in the vendor charges.
			found := false
			for _, e := range vc.Data {
				found = found || e.InteractionID == iid
			}
			ok = ok && found
		}
		if !ok {
			t.Errorf("file row %d:\n got %+v\nwant %+v (interaction id %s, day %d)", i, r, w, iid, dayNum)
		}
		fileScore += r.Score
		fileAmount += r.AmountMicros
	}
	if fileScore != 3.875 || fileAmount != 59_583_335 {
		t.Errorf("file: score %v, amount %d; want 3.875, 59,583,335", fileScore, fileAmount)
	}

	// ---- Exports of monitoring_metrics, CSV and Parquet, two column orders. ----
	// Per campaign (one local day; attributed items count in the credited
	// interaction's campaign, purchase_count counts distinct purchases):
	//   c1 (v1, CPC, P1): 24 impressions, 6 clicks all charged, 4,149,108 µ;
	//      pur-1 #1 and #2, pur-7, pur-8: 3 purchases, 4 units, 15,833,333 µ
	//   c2 (v2, CPC, P2): 24 impressions, 11 clicks (clk-2-1-again), 10 charged, 5,555,560 µ;
	//      pur-1 #0 (× 2), pur-12 #1: 2 purchases, 3 units, 22,000,002 µ
	//   c4 (v4, CPM, P3): 25 impressions (imp-5-3-again), 24 charged, 56,296.080 µ; 1 click (clk-4-3);
	//      pur-12 #0 (× 3): 1 purchase, 3 units, 21,750,000 µ
	//   cB (v5, CPC, P4): 4 clicks, 3 charged, 300,000 µ; no impressions, no purchases
	type exRow struct {
		name, vendor, charge, product string
		imps, clicks, cClicks, cImps  int64
		spClkNanos, spImpNanos        int64
		purchases, qty, amountNanos   int64
	}
	exRows := []exRow{
		{"c1", "v1", "CPC", "P1", 24, 6, 6, 0, 4_149_108_000, 0, 3, 4, 15_833_333_000},
		{"c2", "v2", "CPC", "P2", 24, 11, 10, 0, 5_555_560_000, 0, 2, 3, 22_000_002_000},
		{"c4", "v4", "CPM", "P3", 25, 1, 0, 24, 0, 56_296_080, 1, 3, 21_750_000_000},
		{"cB", "v5", "CPC", "P4", 0, 4, 3, 0, 300_000_000, 0, 0, 0, 0},
	}
	dec9 := func(n int64) string { // nanos as the exact decimal of the files
		s := strings.TrimRight(fmt.Sprintf("%d.%09d", n/1e9, n%1e9), "0")
		return strings.TrimSuffix(s, ".")
	}
	ratio := func(a, b int64) string {
		if b == 0 {
			return ""
		}
		return strconv.FormatFloat(float64(a)/float64(b), 'f', -1, 64)
	}
	perUnit := func(nanos, n, mult int64) string { // rounded half up to the nano
		if n == 0 {
			return ""
		}
		return dec9((2*nanos*mult + n) / (2 * n))
	}
	exports := []struct {
		dims, metrics []string
		row           func(r exRow) []string
	}{
		{[]string{"campaign_name", "day_local"},
			[]string{"impressions", "clicks", "charged_clicks", "charged_impressions", "ad_spend", "ctr", "cpc", "cpm",
				"purchase_count", "quantity", "total_purchase_amount", "roas", "acos", "conversion_rate"},
			func(r exRow) []string {
				spend := r.spClkNanos + r.spImpNanos
				return []string{r.name, date, fmt.Sprint(r.imps), fmt.Sprint(r.clicks), fmt.Sprint(r.cClicks), fmt.Sprint(r.cImps), dec9(spend),
					ratio(r.clicks, r.imps), perUnit(r.spClkNanos, r.cClicks, 1), perUnit(r.spImpNanos, r.cImps, 1000),
					fmt.Sprint(r.purchases), fmt.Sprint(r.qty), dec9(r.amountNanos), ratio(r.amountNanos, spend), ratio(spend, r.amountNanos),
					ratio(r.purchases, r.clicks)}
			}},
		{[]string{"day_local", "vendor_id", "charge_type", "entity_id", "ad_format", "currency_code"},
			[]string{"ad_spent_impressions", "ad_spent_clicks", "clicks", "ad_spent_attributed_purchases", "charged_attributed_purchases", "ad_spent_exclusive_campaign"},
			func(r exRow) []string {
				return []string{date, r.vendor, r.charge, r.product, "listings", "USD", dec9(r.spImpNanos), dec9(r.spClkNanos), fmt.Sprint(r.clicks), "0", "0", "0"}
			}},
	}
	for _, ex := range exports {
		var want [][]string
		for _, r := range exRows { // both orders sort c1, c2, c4, cB (v1, v2, v4, v5)
			want = append(want, ex.row(r))
		}
		for _, format := range []string{"csv", "parquet"} {
			reqBody, _ := json.Marshal(map[string]any{"dataset": "monitoring_metrics", "dimensions": ex.dims, "metrics": ex.metrics,
				"granularity": "day_local", "startDate": date, "endDate": date, "format": format})
			var created struct {
				ExportID string `json:"exportId"`
				Status   string `json:"status"`
			}
			if err := json.Unmarshal(d.must("POST", "/public/v1/export-service/exports", advKey, string(reqBody), 202), &created); err != nil || created.Status != "pending" {
				t.Fatalf("export: %v %+v", err, created)
			}
			var v struct {
				Status   string `json:"status"`
				URL      string `json:"url"`
				RowCount int64  `json:"rowCount"`
			}
			testenv.Eventually(t, 60*time.Second, func() error {
				if err := json.Unmarshal(d.must("GET", "/public/v1/export-service/exports/"+created.ExportID, advKey, "", 200), &v); err != nil {
					return err
				}
				if v.Status != "completed" {
					return fmt.Errorf("export %s is %s", created.ExportID, v.Status)
				}
				return nil
			})
			st, data := sfDownload(t, v.URL)
			if st != 200 {
				t.Fatalf("export download: %d %.200s", st, data)
			}
			header, rows, err := exportsfile.ReadFile(format, data)
			if err != nil {
				t.Fatal(err)
			}
			if wantHeader := append(slices.Clone(ex.dims), ex.metrics...); !slices.Equal(header, wantHeader) {
				t.Errorf("%s export header %q, want %q", format, header, wantHeader)
			}
			if v.RowCount != int64(len(want)) || fmt.Sprintf("%q", rows) != fmt.Sprintf("%q", want) {
				t.Errorf("%s export of %v: %d rows\n%q\nwant\n%q", format, ex.dims, v.RowCount, rows, want)
			}
		}
	}
	t.Logf("scenario done in %s", time.Since(began).Round(time.Millisecond))
}

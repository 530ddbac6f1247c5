//go:build dev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/retry"
)

// The demo traffic: on the demo marketplace's first start, `endcap dev`
// writes a week of believable traffic for it through the real paths, so
// that the console's charts and the first export show something (README).
// Auctions run in the process at past instants (app.PastAuctions: the
// engine, the signing keys and the auctions topic of POST /v2/auctions);
// impressions, clicks and purchases go through POST /v2/events with the
// marketplace key, with those instants as occurredAt, and the projectors
// fold and charge them as any event. The rollups of the week are then
// recomputed, since the hourly full refresh ran before the traffic was
// there. A file beside the credentials records that it was done (and for
// which marketplace), so that the next start does not do it again.

// demoTrafficFile is <dir>/dev/demo-traffic.json.
const demoTrafficFile = "demo-traffic.json"

// demoTrafficDays is how many whole local days before today are seeded.
// Today is left alone: its spend is what the auctions of today read
// (budgets, pacing), and the README's auctions should find the demo
// campaigns with their whole budgets.
const demoTrafficDays = 7

// demoTrafficDone is what demo-traffic.json holds.
type demoTrafficDone struct {
	MarketplaceID string    `json:"marketplaceId"`
	SeededAt      time.Time `json:"seededAt"`
	From          time.Time `json:"from"`
	demoTrafficCounts
}

type demoTrafficCounts struct {
	Auctions    int `json:"auctions"`
	Impressions int `json:"impressions"`
	Clicks      int `json:"clicks"`
	Purchases   int `json:"purchases"`
}

// demoPrices are the demo products' prices (demoProducts), for purchases.
var demoPrices = map[string]float64{"p-1": 89.90, "p-2": 129, "p-3": 149, "p-4": 99, "p-5": 49, "p-6": 39}

// demoAuctionBodies are the auctions shoppers' pages ask for: a category
// page, a search, a product list, a banner; %s is the shopper.
var demoAuctionBodies = []string{
	`{"auctions":[{"type":"listings","slots":2,"category":{"id":"hiking"},"opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":2,"category":{"id":"running"},"opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":2,"category":{"id":"kids"},"opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":3,"category":{"id":"shoes"},"searchQuery":"running shoes","opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":2,"category":{"id":"hiking"},"searchQuery":"trail running shoes","opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":3,"products":{"ids":["p-1","p-2","p-3","p-4","p-5"]},"opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p-3","p-4","p-2"]},"opaqueUserId":%q}]}`,
	`{"auctions":[{"type":"banners","slots":1,"slotId":"home-hero","searchQuery":"shoes","opaqueUserId":%q}]}`,
}

// demoHourShape is the share of a day's auctions in each local hour (a
// quiet night, a lunch bump, an evening peak); demoWeekShape the weight of
// each weekday, Sunday first (busier weekends).
var (
	demoHourShape = [24]float64{0.4, 0.25, 0.15, 0.1, 0.1, 0.2, 0.5, 0.9, 1.2, 1.3, 1.4, 1.5,
		1.8, 1.7, 1.4, 1.3, 1.3, 1.5, 1.9, 2.3, 2.4, 2.0, 1.4, 0.8}
	demoWeekShape = [7]float64{1.3, 0.85, 0.9, 0.95, 1.0, 1.1, 1.35}
)

// demoAuctionsPerDay is the mean of a weekday.
const demoAuctionsPerDay = 900

// seedDemoTraffic writes the week of traffic unless the marker file says it
// was written for this marketplace already. apiURL is the process's API.
func seedDemoTraffic(ctx context.Context, a *app.App, creds credentials, apiURL, devDir string, log *slog.Logger) error {
	marker := filepath.Join(devDir, demoTrafficFile)
	if b, err := os.ReadFile(marker); err == nil {
		var done demoTrafficDone
		if json.Unmarshal(b, &done) == nil && done.MarketplaceID == creds.MarketplaceID {
			return nil
		}
	}
	m, ok := a.Accounts.Marketplace(creds.MarketplaceID)
	if !ok {
		return fmt.Errorf("demo marketplace %s is unknown", creds.MarketplaceID)
	}
	past, err := a.PastAuctions(creds.MarketplaceID)
	if err != nil {
		return err
	}
	start := time.Now()
	loc := m.Location()
	now := start.In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	from := today.AddDate(0, 0, -demoTrafficDays)
	log.Info("demo traffic: writing a week of auctions, impressions, clicks and purchases for the demo marketplace", "from", from.Format(time.DateOnly))

	s := &demoSender{url: strings.TrimSuffix(apiURL, "/") + "/v2/events", key: creds.MarketplaceKey,
		client: &http.Client{Timeout: 10 * time.Second}}
	// The same seed for the same marketplace: a start interrupted half-way
	// sends the same event ids again at the next start, which the fold
	// drops as duplicates (docs/design/projector.md).
	rng := rand.New(rand.NewPCG(uint64(len(creds.MarketplaceID)), seedOf(creds.MarketplaceID)))
	var counts demoTrafficCounts
	var pending []demoEvent // purchases due later, by time
	n := 0
	for hour := from; hour.Before(today); hour = hour.Add(time.Hour) {
		local := hour.In(loc)
		mean := demoAuctionsPerDay / 24.0 * demoHourShape[local.Hour()] * demoWeekShape[local.Weekday()]
		k := poisson(rng, mean)
		for range k {
			at := hour.Add(time.Duration(rng.Int64N(int64(time.Hour))))
			if !at.Before(today) {
				continue
			}
			n++
			user := fmt.Sprintf("demo-shopper-%d", rng.IntN(3000))
			body := fmt.Sprintf(demoAuctionBodies[rng.IntN(len(demoAuctionBodies))], user)
			winners, err := past.Run(ctx, at, []byte(body))
			if err != nil {
				return fmt.Errorf("demo auction: %w", err)
			}
			counts.Auctions++
			for _, ws := range winners {
				for _, w := range ws {
					// Shown most of the time; clicked more at the top.
					if rng.Float64() > 0.85 {
						continue
					}
					id := fmt.Sprintf("demo-%d-%d", n, w.Rank)
					seen := at.Add(time.Duration(500+rng.IntN(4000)) * time.Millisecond)
					s.add(ctx, "impressions", demoEvent{at: seen, json: fmt.Sprintf(`{"id":"%s-i","occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}`,
						id, stamp(seen), user, w.ResolvedBidID)})
					counts.Impressions++
					ctr := 0.07 / float64(w.Rank)
					if w.Type != "product" {
						ctr = 0.01
					}
					if rng.Float64() > ctr {
						continue
					}
					clicked := seen.Add(time.Duration(2+rng.IntN(60)) * time.Second)
					s.add(ctx, "clicks", demoEvent{at: clicked, json: fmt.Sprintf(`{"id":"%s-c","occurredAt":%q,"opaqueUserId":%q,"resolvedBidId":%q}`,
						id, stamp(clicked), user, w.ResolvedBidID)})
					counts.Clicks++
					price, ok := demoPrices[w.ID]
					if !ok || rng.Float64() > 0.12 {
						continue
					}
					bought := clicked.Add(time.Duration(5+rng.IntN(180)) * time.Minute)
					if bought.Before(today) {
						pending = append(pending, demoEvent{at: bought, json: fmt.Sprintf(`{"id":"%s-p","occurredAt":%q,"opaqueUserId":%q,"items":[{"productId":%q,"unitPrice":%v,"quantity":%d}]}`,
							id, stamp(bought), user, w.ID, price, 1+rng.IntN(2))})
					}
				}
			}
			// Shoppers who buy without an ad (organic sales).
			if rng.Float64() < 0.02 {
				p := fmt.Sprintf("p-%d", 1+rng.IntN(5))
				bought := at.Add(time.Duration(rng.IntN(30)) * time.Minute)
				if bought.Before(today) {
					pending = append(pending, demoEvent{at: bought, json: fmt.Sprintf(`{"id":"demo-%d-o","occurredAt":%q,"opaqueUserId":%q,"items":[{"productId":%q,"unitPrice":%v,"quantity":1}]}`,
						n, stamp(bought), user, p, demoPrices[p])})
				}
			}
		}
		// The purchases of the hours seen so far, after the clicks they
		// follow (attribution looks back from a purchase).
		s.flush(ctx)
		kept := pending[:0]
		for _, p := range pending {
			if p.at.Before(hour.Add(time.Hour)) {
				s.add(ctx, "purchases", p)
				counts.Purchases++
			} else {
				kept = append(kept, p)
			}
		}
		pending = kept
		if s.err != nil {
			return s.err
		}
	}
	for _, p := range pending {
		s.add(ctx, "purchases", p)
		counts.Purchases++
	}
	if s.flush(ctx); s.err != nil {
		return s.err
	}
	// The week's days (and one more on each side for zones east or west of
	// UTC), recomputed once the projectors have folded the events.
	var days []time.Time
	for d := from.AddDate(0, 0, -1); !d.After(today.AddDate(0, 0, 1)); d = d.AddDate(0, 0, 1) {
		days = append(days, time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC))
	}
	if err := a.RefreshRollups(ctx, days, time.Minute); err != nil {
		return fmt.Errorf("demo traffic: rollups: %w", err)
	}
	done := demoTrafficDone{MarketplaceID: creds.MarketplaceID, SeededAt: start.UTC(), From: from.UTC(), demoTrafficCounts: counts}
	b, _ := json.MarshalIndent(done, "", "  ")
	tmp := marker + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, marker); err != nil {
		return err
	}
	log.Info("demo traffic: written", "auctions", counts.Auctions, "impressions", counts.Impressions, "clicks", counts.Clicks,
		"purchases", counts.Purchases, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func seedOf(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// poisson draws from a Poisson distribution of mean m (Knuth's method; m is
// at most a few hundred here, drawn as a sum of smaller ones).
func poisson(rng *rand.Rand, m float64) int {
	n := 0
	for m > 30 {
		n += poisson(rng, 30)
		m -= 30
	}
	l, p := math.Exp(-m), 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return n
		}
		n++
	}
}

type demoEvent struct {
	at   time.Time
	json string
}

// demoSender posts events in requests of at most 50 of each kind.
type demoSender struct {
	url, key string
	client   *http.Client
	batch    map[string][]string
	err      error
}

func (s *demoSender) add(ctx context.Context, kind string, e demoEvent) {
	if s.batch == nil {
		s.batch = map[string][]string{}
	}
	s.batch[kind] = append(s.batch[kind], e.json)
	if len(s.batch[kind]) == 50 {
		s.flush(ctx)
	}
}

func (s *demoSender) flush(ctx context.Context) {
	if s.err != nil || len(s.batch) == 0 {
		return
	}
	var body bytes.Buffer
	body.WriteByte('{')
	for _, kind := range []string{"impressions", "clicks", "purchases"} {
		if len(s.batch[kind]) == 0 {
			continue
		}
		if body.Len() > 1 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, "%q:[%s]", kind, strings.Join(s.batch[kind], ","))
	}
	body.WriteByte('}')
	clear(s.batch)
	// A 503 (Kafka busy) is retried a few times; anything else stops.
	wait := retry.New(200*time.Millisecond, 2*time.Second)
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body.Bytes()))
		if err != nil {
			s.err = err
			return
		}
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			s.err = fmt.Errorf("demo events: %w", err)
			return
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 5:
			if _, err := wait.Wait(ctx); err != nil {
				s.err = err
				return
			}
		default:
			s.err = fmt.Errorf("demo events: %s: %s", resp.Status, msg)
			return
		}
	}
}

package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
)

// SponsoredBid is one auction winner: the product it won with and the resolvedBidId that charges it.
type SponsoredBid struct {
	Product string
	Token   string
}

// SponsoredConfig turns part of RunSponsoredEvents' impressions and clicks into sponsored ones.
type SponsoredConfig struct {
	Share    float64  // share of impressions (and so of clicks) that carry a resolvedBidId, 0–1
	Products []string // product ids of the auctions that win the tokens, default the demo's p-1..p-5
	Auctions int      // auctions run before the load to fill the pool, default 300
	// Refresh is how often a background loop replaces the pool with RefreshAuctions fresh auctions' winners
	// during the run (a winner is charged once per kind, so a fixed pool would only charge in the first
	// seconds). Default 1s, negative = never; RefreshAuctions default 20.
	Refresh         time.Duration
	RefreshAuctions int
	// Mint, when set, gives every sponsored impression a winner of its own: the claims of a pool winner's
	// token with a fresh auction id and time (just before the event), signed with Mint, which must hold the
	// API's signing key (ENDCAP_BID_SIGNING_KEYS). Each sponsored impression and its click is then charged
	// on its own, as in production, where a winner is shown once. Without it the events reuse the pool's
	// winners, and nearly all of their charges are duplicates that the charge step only has to find.
	Mint *bidtoken.Keyring
}

// SponsoredReport is the events Report plus what the auctions gave.
type SponsoredReport struct {
	Report
	PoolWinners    int   // winners collected before the load
	RefreshWinners int64 // winners collected by the refresh loop
}

// RunSponsoredEvents is RunEvents with a share of sponsored impressions and clicks. It first runs real
// listings auctions at cfg.URL (with cfg.APIKey) to collect winners; a share sp.Share of the impressions then
// carries a winner's resolvedBidId and no entity, clicks follow their impression (sponsored or not), and a
// purchase following a sponsored click buys the winner's product for the same opaqueUserId, so that
// attribution has work. Event ids stay unique as in RunEvents.
func RunSponsoredEvents(ctx context.Context, cfg EventsConfig, sp SponsoredConfig) (SponsoredReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return SponsoredReport{}, err
	}
	if sp.Share < 0 || sp.Share > 1 {
		return SponsoredReport{}, fmt.Errorf("loadgen: sponsored share %v outside 0–1", sp.Share)
	}
	if len(sp.Products) == 0 {
		sp.Products = []string{"p-1", "p-2", "p-3", "p-4", "p-5"}
	}
	if sp.Auctions <= 0 {
		sp.Auctions = 300
	}
	if sp.Refresh == 0 {
		sp.Refresh = time.Second
	}
	if sp.RefreshAuctions <= 0 {
		sp.RefreshAuctions = 20
	}
	var pool atomic.Pointer[[]SponsoredBid]
	var rep SponsoredReport
	if sp.Share > 0 {
		bids, err := CollectWinners(ctx, cfg.URL, cfg.APIKey, sp.Products, sp.Auctions)
		if err != nil {
			return SponsoredReport{}, err
		}
		if len(bids) == 0 {
			return SponsoredReport{}, errors.New("loadgen: the auctions returned no winners to sponsor events with")
		}
		rep.PoolWinners = len(bids)
		pool.Store(&bids)
		if sp.Refresh > 0 {
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				t := time.NewTicker(sp.Refresh)
				defer t.Stop()
				for {
					select {
					case <-rctx.Done():
						return
					case <-t.C:
					}
					if fresh, err := CollectWinners(rctx, cfg.URL, cfg.APIKey, sp.Products, sp.RefreshAuctions); err == nil && len(fresh) > 0 {
						atomic.AddInt64(&rep.RefreshWinners, int64(len(fresh)))
						pool.Store(&fresh)
					}
				}
			}()
		}
	}
	r, err := runLoad(ctx, cfg, loadTarget{
		path: eventsPath,
		newBody: func(worker int, runID [8]byte) requestBody {
			return &sponsoredBody{
				bodyBuilder: newBodyBuilder(runID, worker, cfg.Seed, cfg.BatchSize, cfg.Users, cfg.Products),
				share:       sp.Share, pool: &pool, mint: sp.Mint,
			}
		},
	})
	rep.Report = r
	rep.RefreshWinners = atomic.LoadInt64(&rep.RefreshWinners)
	return rep, err
}

// CollectWinners runs n listings auctions (5 slots, over products) at baseURL + "/v2/auctions", five per
// request, and returns their winners.
func CollectWinners(ctx context.Context, baseURL, key string, products []string, n int) ([]SponsoredBid, error) {
	u, err := targetURL(baseURL, auctionsPath)
	if err != nil {
		return nil, err
	}
	type auction struct {
		Type     string `json:"type"`
		Slots    int    `json:"slots"`
		Products struct {
			IDs []string `json:"ids"`
		} `json:"products"`
	}
	a := auction{Type: "listings", Slots: min(len(products), defaultSlots)}
	a.Products.IDs = products
	client := &http.Client{Timeout: 10 * time.Second}
	var out []SponsoredBid
	for done := 0; done < n; done += maxAuctionsPerReq {
		k := min(maxAuctionsPerReq, n-done)
		req := struct {
			Auctions []auction `json:"auctions"`
		}{}
		for range k {
			req.Auctions = append(req.Auctions, a)
		}
		body, _ := json.Marshal(req) // cannot fail: strings and ints
		bids, err := postAuctions(ctx, client, u.String(), key, body)
		if err != nil {
			return out, err
		}
		out = append(out, bids...)
	}
	return out, nil
}

func postAuctions(ctx context.Context, client *http.Client, url, key string, body []byte) ([]SponsoredBid, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("loadgen: auctions answered %s", resp.Status)
	}
	var ans struct {
		Results []struct {
			Winners []struct {
				ID            string `json:"id"`
				ResolvedBidID string `json:"resolvedBidId"`
			} `json:"winners"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return nil, fmt.Errorf("loadgen: auctions answer: %w", err)
	}
	var out []SponsoredBid
	for _, r := range ans.Results {
		for _, w := range r.Winners {
			if w.ResolvedBidID != "" {
				out = append(out, SponsoredBid{Product: w.ID, Token: w.ResolvedBidID})
			}
		}
	}
	return out, nil
}

// sponsoredBody is a bodyBuilder whose impressions are sponsored with probability share; clicks follow
// their impression and purchases their click, as in bodyBuilder.
type sponsoredBody struct {
	*bodyBuilder
	share float64
	pool  *atomic.Pointer[[]SponsoredBid]
	impSp []*SponsoredBid // per impression of the body: its winner, nil when organic
	clkSp []*SponsoredBid
	mint  *bidtoken.Keyring
	// minted holds the body's minted winners (impressions first, then clicks without impressions); sized
	// before they are taken, so that impSp and clkSp can point into it.
	minted []SponsoredBid
	impTS  [32]byte // scratch for the impressions' occurredAt
}

// ClickLead is how long before its body's time a sponsored body's impressions occurred (their
// occurredAt), and their minted auctions 100 ms before that: the clicks that follow them, at the body's
// time, are then as late as a shopper's, past the invalid-click rules' minimum delay
// (ENDCAP_INVALID_CLICK_MIN_DELAY, 250 ms), and are charged as in production.
const ClickLead = 2 * time.Second

// winner picks a pool winner for a sponsored event at now: with mint, a fresh one of its own in s.minted[i].
func (s *sponsoredBody) winner(bids []SponsoredBid, i int, now time.Time) *SponsoredBid {
	w := &bids[s.rng.IntN(len(bids))]
	if s.mint == nil {
		return w
	}
	c, err := bidtoken.DecodeUnverified(w.Token)
	if err != nil {
		return w // not a token of this API's: sent as it is (and rejected there)
	}
	at := now.Add(-100 * time.Millisecond).UnixMilli()
	c.AuctionID, c.AuctionTimeMs = auctionID(s.rng, at), at
	tok, err := s.mint.Encode(c)
	if err != nil {
		return w
	}
	s.minted[i] = SponsoredBid{Product: w.Product, Token: tok}
	return &s.minted[i]
}

// auctionID is a UUIDv7 of Unix millisecond ms with random bits from rng.
func auctionID(rng *rand.Rand, ms int64) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[0:8], rng.Uint64())
	binary.BigEndian.PutUint64(id[8:16], rng.Uint64())
	for k := range 6 {
		id[k] = byte(ms >> (40 - 8*k))
	}
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}

func (s *sponsoredBody) build(dst []byte, now time.Time) []byte {
	b := s.bodyBuilder
	ts := now.UTC().AppendFormat(b.ts[:0], "2006-01-02T15:04:05.000Z07:00")
	impAt := now.Add(-ClickLead)
	impTS := impAt.UTC().AppendFormat(s.impTS[:0], "2006-01-02T15:04:05.000Z07:00")
	var bids []SponsoredBid
	if p := s.pool.Load(); p != nil {
		bids = *p
	}
	s.impSp = s.impSp[:0]
	s.clkSp = s.clkSp[:0]
	if n := b.counts[0] + b.counts[1]; cap(s.minted) < n {
		s.minted = make([]SponsoredBid, n)
	}
	s.minted = s.minted[:cap(s.minted)]
	dst = append(dst[:0], '{')
	if n := b.counts[0]; n > 0 {
		dst = openArray(dst, `"impressions":[`)
		for i := 0; i < n; i++ {
			b.imps[i] = b.randInteraction()
			var w *SponsoredBid
			if len(bids) > 0 && b.rng.Float64() < s.share {
				w = s.winner(bids, i, impAt)
			}
			s.impSp = append(s.impSp, w)
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.appendEvent(dst, impTS, &b.imps[i], w, false)
		}
		dst = append(dst, ']')
	}
	if n := b.counts[1]; n > 0 {
		dst = openArray(dst, `"clicks":[`)
		for i := 0; i < n; i++ {
			var w *SponsoredBid
			if len(b.imps) > 0 {
				b.clks[i] = b.imps[i%len(b.imps)]
				w = s.impSp[i%len(b.imps)]
			} else {
				b.clks[i] = b.randInteraction()
				if len(bids) > 0 && b.rng.Float64() < s.share {
					w = s.winner(bids, b.counts[0]+i, now)
				}
			}
			s.clkSp = append(s.clkSp, w)
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.appendEvent(dst, ts, &b.clks[i], w, true)
		}
		dst = append(dst, ']')
	}
	if n := b.counts[2]; n > 0 {
		dst = openArray(dst, `"purchases":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			if len(b.clks) > 0 {
				if w := s.clkSp[i%len(b.clks)]; w != nil {
					dst = s.appendSponsoredPurchase(dst, ts, b.clks[i%len(b.clks)].user, w.Product)
					continue
				}
			}
			dst = b.appendPurchase(dst, ts, i)
		}
		dst = append(dst, ']')
	}
	return b.appendPageviewsAndClose(dst, ts)
}

// appendEvent writes an impression or click: organic (bodyBuilder's) when w is nil, else with w's
// resolvedBidId and no entity.
func (s *sponsoredBody) appendEvent(dst, ts []byte, it *interaction, w *SponsoredBid, click bool) []byte {
	b := s.bodyBuilder
	if w == nil {
		return b.appendInteraction(dst, ts, it, click)
	}
	dst = b.appendHead(dst, ts, it.user)
	dst = append(dst, `,"resolvedBidId":`...)
	dst = strconv.AppendQuote(dst, w.Token)
	dst = append(dst, `,"placement":{"path":`...)
	dst = appendPath(dst, it.page)
	dst = append(dst, `,"position":`...)
	dst = strconv.AppendInt(dst, int64(it.position), 10)
	dst = append(dst, `},"page":`...)
	dst = appendPageObj(dst, it.page)
	dst = append(dst, `,"deviceType":"mobile","channel":"onsite"`...)
	if click {
		dst = append(dst, `,"clickType":"product"`...)
	}
	return append(dst, '}')
}

// appendSponsoredPurchase writes a purchase of one item, the sponsored product, by user.
func (s *sponsoredBody) appendSponsoredPurchase(dst, ts []byte, user int, product string) []byte {
	b := s.bodyBuilder
	dst = b.appendHead(dst, ts, user)
	dst = append(dst, `,"items":[{"productId":`...)
	dst = strconv.AppendQuote(dst, product)
	cents := 99 + b.rng.IntN(19901)
	dst = append(dst, `,"unitPrice":`...)
	dst = strconv.AppendInt(dst, int64(cents/100), 10)
	c := cents % 100
	dst = append(dst, '.', byte('0'+c/10), byte('0'+c%10))
	dst = append(dst, `,"quantity":1}]}`...)
	return dst
}

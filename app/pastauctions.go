package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/spend"
)

// PastAuctions runs auctions at instants of the caller's choosing, as POST
// /v2/auctions runs them (the process's views, its signing keys, the
// auctions topic), so that their resolvedBidIds carry those instants and
// events of the same past are charged. It is how `endcap dev` writes a week
// of demo traffic (cmd/endcap/demotraffic.go); the API never uses it. Its
// budget gate lets every campaign bid: the spend of a past day is not in the
// spend cache, which holds today's, so the budgets of those days are applied
// where they always are, when the charges are decided (docs/design/charges.md).
// Its runs take turns (the engine's clock is the instant of the one under
// way).
type PastAuctions struct {
	engine   *auction.Engine
	recorder auction.Recorder
	market   *auction.Market
	mu       sync.Mutex
	at       time.Time
}

// PastAuctions returns the past auctions of marketplace mp. The process
// must run the API target.
func (a *App) PastAuctions(mp string) (*PastAuctions, error) {
	if !a.target.runs(TargetAPI) {
		return nil, errors.New("past auctions need the api target")
	}
	m, ok := a.Accounts.Marketplace(mp)
	if !ok {
		return nil, fmt.Errorf("marketplace %s is unknown", mp)
	}
	p := &PastAuctions{
		recorder: ingest.NewAuctionPublisher(a.auctionsKafka, a.Topics.Auctions, a.log),
		market:   api.MarketOf(&m),
	}
	p.engine = a.auctionEngine()
	p.engine.Budget = openGate{}
	p.engine.Now = func() time.Time { return p.at }
	return p, nil
}

// Run runs the auctions of body, a POST /v2/auctions body, at instant at,
// records them on the auctions topic, and returns each auction's winners.
func (p *PastAuctions) Run(ctx context.Context, at time.Time, body []byte) ([][]auction.Winner, error) {
	reqs, verr := auction.ParseAuctions(body, auction.Auctions)
	if verr != nil {
		return nil, fmt.Errorf("%s: %s", verr.Code, verr.Message)
	}
	defer auction.Release(reqs)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at = at
	results, err := p.engine.Run(ctx, p.market, auction.Auctions, reqs)
	if err != nil {
		return nil, err
	}
	defer auction.ReleaseResults(results)
	out := make([][]auction.Winner, len(results))
	for i := range results {
		r := &results[i]
		for _, w := range r.Winners {
			// The winners share the request's bytes, released on return.
			w.ID, w.CampaignID, w.VendorID = strings.Clone(w.ID), strings.Clone(w.CampaignID), strings.Clone(w.VendorID)
			w.ResolvedBidID, w.AssetURL = strings.Clone(w.ResolvedBidID), strings.Clone(w.AssetURL)
			w.ProductIDs = nil
			out[i] = append(out[i], w)
		}
		p.recorder.Record(&r.Record)
	}
	return out, nil
}

// openGate lets every campaign bid (PastAuctions).
type openGate struct{}

func (openGate) Check(*auction.Market, *spend.Slot, string, spend.Limits, time.Time) auction.BudgetVerdict {
	return auction.BudgetOK
}

// RefreshRollups recomputes the daily rollups of days now, as an export
// recomputes the days of its window (docs/design/rollups.md): under the rollups'
// lock, after waiting up to foldWait for the projectors to fold what the
// topics hold. The process must run the projector target.
func (a *App) RefreshRollups(ctx context.Context, days []time.Time, foldWait time.Duration) error {
	if !a.target.runs(TargetProjector) {
		return errors.New("refreshing the rollups needs the projector target")
	}
	rj, err := rollups.New(rollups.Options{ClickHouse: a.ClickHouse, Log: a.log,
		Lock: a.rollupsLock(), Fold: a.foldWatermark(), FoldWait: foldWait})
	if err != nil {
		return err
	}
	_, err = rj.Refresh(ctx, days)
	return err
}

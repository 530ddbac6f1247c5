package auction

import (
	"context"
	"errors"
	"time"

	"github.com/endcap/endcap/management/campaigns/freqcap"
)

// Frequency caps (docs/reference/campaigns.md, Restrictions): a campaign (or a bid)
// whose shopper reached one of its caps in the current day, week or month
// of the marketplace does not compete in that shopper's auctions.
//
// The shopper's counts are read once per request (Run or Explain), at the
// first auction of it that meets a capped campaign, in one round trip
// bounded by Engine.CapTimeout; the other auctions of the request reuse
// them. A request without a capped candidate reads nothing: the cost of caps
// to it is the Gate.Capped test of each campaign it meets.
//
// A shopper the caps cannot count (no opaqueUserId, which a denied
// personalization consent removes; or the counts not read in time) is
// served by a capped campaign unless it is set to skip them
// (capsWithoutShopper: skip).

// CapView reads a shopper's counts (freqcap.Store).
type CapView interface {
	Read(ctx context.Context, mp, opaqueUserID string, at time.Time, loc *time.Location) (freqcap.Counts, error)
}

// capState is a request's frequency cap counts, read at most once.
type capState struct {
	any      bool // a capped campaign met in this auction (reset per auction)
	loaded   bool // counts read (or failed) for mp and user
	mp, user string
	counts   freqcap.Counts
	err      error
}

// newRequest forgets the counts of the previous request.
func (cs *capState) newRequest() {
	*cs = capState{}
}

// checkCaps applies the campaigns' frequency caps: campaign-level caps
// here, bid-level ones in buildCandidates (bidCapped).
func (a *auctionEnv) checkCaps(ctx context.Context) {
	st := a.st
	if !st.caps.any {
		return
	}
	st.caps.any = false
	user := a.r.OpaqueUserID
	var err error
	if user == "" {
		err = errNoShopper
	} else {
		err = a.loadCaps(ctx, user)
	}
	if err != nil && !errors.Is(err, errNoShopper) && a.e.Log != nil {
		a.e.Log.Warn("auction: frequency cap counts unavailable; capped campaigns follow capsWithoutShopper", "marketplace", a.mp, "err", err)
	}
	for i := range st.camps {
		c := &st.camps[i]
		if !c.needCap || !c.ok {
			continue
		}
		if err != nil {
			if c.c.CapsSkip {
				c.ok = false
				c.why = ReasonFrequencyCapUnavailable
				if errors.Is(err, errNoShopper) {
					c.why = ReasonFrequencyCapNoShopper
				}
			}
			continue
		}
		for _, cp := range c.c.Caps {
			if cp.Bid {
				c.bidCaps = true
				continue
			}
			if st.caps.counts.Get(cp.Frequency, freqcap.CampaignField(c.c.ID, cp.Kind)) >= cp.Limit {
				c.ok, c.why = false, ReasonFrequencyCapped
				break
			}
		}
	}
}

var errNoShopper = errors.New("no opaqueUserId")

// loadCaps reads the shopper's counts, once per request.
func (a *auctionEnv) loadCaps(ctx context.Context, user string) error {
	cs := &a.st.caps
	if cs.loaded && cs.mp == a.mp && cs.user == user {
		return cs.err
	}
	cs.loaded, cs.mp, cs.user = true, a.mp, user
	if a.e.Caps == nil {
		cs.err = errors.New("no frequency cap view")
		return cs.err
	}
	timeout := a.e.CapTimeout
	if timeout <= 0 {
		timeout = 20 * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cs.counts, cs.err = a.e.Caps.Read(cctx, a.mp, user, a.at, a.m.Loc)
	cancel()
	return cs.err
}

// bidCapped reports whether the shopper reached a bid-level cap of bid b
// of campaign c (checkCaps read the counts).
func (a *auctionEnv) bidCapped(c *camp, b *bidRef) bool {
	for _, cp := range c.c.Caps {
		if cp.Bid && a.st.caps.counts.Get(cp.Frequency, freqcap.BidField(c.c.ID, b.bidID, cp.Kind)) >= cp.Limit {
			return true
		}
	}
	return false
}

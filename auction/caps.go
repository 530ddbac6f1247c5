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
// bounded by Engine.CapTimeout; the other auctions of the request for the
// same shopper reuse them. A request in a marketplace without capped
// campaigns reads nothing: the cost of caps to it is the Gate.Capped test
// of each campaign it meets.
//
// A shopper the caps cannot count (no opaqueUserId, which a denied
// personalization consent removes; or the counts not read in time) is
// served by a capped campaign unless it is set to skip them
// (capsWithoutShopper: skip).

// CapView sends the read of a shopper's counts (freqcap.Store.Send), whose
// reply the auction takes with the Pending's Receive, or drops with its
// Discard, by the deadline.
type CapView interface {
	Send(ctx context.Context, mp, opaqueUserID string, deadline time.Time, p *freqcap.Pending)
}

// The read overlaps the auction's own work, in the auction's goroutine: it
// is sent as the auction begins reading the index when the marketplace has
// a capped campaign (index.Market.Capped), or at the first capped campaign
// the auction meets; checkCaps takes the reply once the products are read,
// and only when a capped campaign was met. By then the reply has mostly
// come: taking it is one read of a socket, without waiting. The cost: a
// marketplace with caps reads the counts of every request with a shopper,
// also of one that meets no capped campaign (the reply is then read and
// dropped as the request ends). The pending read, the counts and their
// memory stay in the pooled state for the next request.

// capState is a request's frequency cap counts, read at most once.
type capState struct {
	any      bool // a capped campaign met in this auction (reset per auction)
	sent     bool // a read for mp and user was sent in this request
	taken    bool // and its reply taken: counts and err
	mp, user string
	pending  freqcap.Pending
	counts   freqcap.Counts
	err      error
}

// newRequest forgets the counts of the previous request.
func (cs *capState) newRequest() {
	cs.endRequest()
	cs.any, cs.sent, cs.taken, cs.mp, cs.user, cs.err = false, false, false, "", "", nil
}

// endRequest drops a read whose reply was not taken.
func (cs *capState) endRequest() {
	if cs.sent && !cs.taken {
		cs.pending.Discard()
		cs.taken = true
	}
}

// capMet is called when the auction meets a capped campaign that may
// compete: checkCaps then applies the caps, and the shopper's counts are
// read if no read was sent.
func (a *auctionEnv) capMet() {
	if !a.st.caps.any {
		a.st.caps.any = true
		a.startCapRead()
	}
}

// startCapRead sends the read of the shopper's counts, unless a read of
// this request already did (for the same shopper) or the auction has no
// shopper.
func (a *auctionEnv) startCapRead() {
	cs := &a.st.caps
	user := a.r.OpaqueUserID
	if user == "" || (cs.sent && cs.mp == a.mp && cs.user == user) {
		return
	}
	cs.endRequest() // another shopper's read of this request: its auctions are over
	cs.sent, cs.taken, cs.mp, cs.user, cs.err = true, false, a.mp, user, nil
	if a.e.Caps == nil {
		cs.taken, cs.err = true, errors.New("no frequency cap view")
		return
	}
	timeout := a.e.CapTimeout
	if timeout <= 0 {
		timeout = 20 * time.Millisecond
	}
	a.e.Caps.Send(a.ctx, a.mp, user, time.Now().Add(timeout), &cs.pending)
}

// checkCaps applies the campaigns' frequency caps: campaign-level caps
// here, bid-level ones in buildCandidates (bidCapped).
func (a *auctionEnv) checkCaps() {
	st := a.st
	if !st.caps.any {
		return
	}
	st.caps.any = false
	var err error
	if a.r.OpaqueUserID == "" {
		err = errNoShopper
	} else {
		cs := &st.caps
		if !cs.taken {
			cs.err = cs.pending.Receive(a.at, a.m.Loc, &cs.counts)
			cs.taken = true
		}
		err = cs.err
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
		has := st.caps.counts.Has(c.c.CapHash) // a limit is at least 1: no count of the campaign, no cap reached
		for _, cp := range c.c.Caps {
			if cp.Bid {
				c.bidCaps = has
				continue
			}
			if has && st.caps.counts.Campaign(cp.Frequency, c.c.ID, cp.Kind) >= cp.Limit {
				c.ok, c.why = false, ReasonFrequencyCapped
				break
			}
		}
	}
}

var errNoShopper = errors.New("no opaqueUserId")

// bidCapped reports whether the shopper reached a bid-level cap of bid b
// of campaign c (checkCaps read the counts).
func (a *auctionEnv) bidCapped(c *camp, b *bidRef) bool {
	for _, cp := range c.c.Caps {
		if cp.Bid && a.st.caps.counts.Bid(cp.Frequency, c.c.ID, b.bidID, cp.Kind) >= cp.Limit {
			return true
		}
	}
	return false
}

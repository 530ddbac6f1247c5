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

// CapView reads a shopper's counts (freqcap.Store) into c, whose memory it
// reuses.
type CapView interface {
	Read(ctx context.Context, mp, opaqueUserID string, at time.Time, loc *time.Location, c *freqcap.Counts) error
}

// The read overlaps the auction's own work: it starts, on a goroutine of
// its own, as the auction begins reading the index when the marketplace has
// a capped campaign (index.Market.Capped), or at the first capped campaign
// the auction meets; checkCaps waits for it once the products are read, and
// only when a capped campaign was met. A Redis round trip on a busy two-core
// host takes about as long as the rest of a 500-product auction
// (BenchmarkEngine500 with ENDCAP_BENCH_CAPPED_PERCENT=20;
// docs/reference/campaigns.md, The auction). The cost: a marketplace with
// caps reads the counts of every request with a shopper, also of one that
// meets no capped campaign.
//
// What a read costs the process is a goroutine, a context with the
// deadline, the command and its reply (freqcap.Counts: one buffer, no
// allocation per count); the capRead, with the Counts' memory, is kept in
// the pooled state for the next request once its read is over. (Long-lived
// readers handed each read were no cheaper within the noise of
// BenchmarkEngine500, and outlive every test's engine.)

// capState is a request's frequency cap counts, read at most once.
type capState struct {
	any      bool // a capped campaign met in this auction (reset per auction)
	mp, user string
	read     *capRead // the read for mp and user, pending or done; nil: none
	spare    *capRead // a read that is over, whose memory serves the next
}

// capRead is one read of a shopper's counts. Its reader sends one token
// on done once counts and err are set; whoever takes it sets taken. A read
// still pending when its request ends is left to its reader: nothing of a
// request outlives it but the read.
type capRead struct {
	done   chan struct{} // capacity 1
	taken  bool
	counts freqcap.Counts
	err    error
	// What to read, until it is read.
	ctx      context.Context
	v        CapView
	mp, user string
	at       time.Time
	loc      *time.Location
	deadline time.Time
}

// over reports whether the read is over (taking its token): then its
// memory can serve another read.
func (r *capRead) over() bool {
	if r.taken {
		return true
	}
	select {
	case <-r.done:
		r.taken = true
		return true
	default:
		return false
	}
}

// wait waits for the read's token (its goroutine gives up at the deadline).
func (r *capRead) wait() {
	if !r.taken {
		<-r.done
		r.taken = true
	}
}

// newRequest forgets the counts of the previous request, keeping the
// memory of its read if that is over.
func (cs *capState) newRequest() {
	spare := cs.spare
	if r := cs.read; r != nil && r.over() {
		spare = r
	}
	*cs = capState{spare: spare}
}

// capMet is called when the auction meets a capped campaign that may
// compete: checkCaps then applies the caps, and the shopper's counts are
// read if no read has started.
func (a *auctionEnv) capMet() {
	if !a.st.caps.any {
		a.st.caps.any = true
		a.startCapRead()
	}
}

// startCapRead starts reading the shopper's counts, unless a read of this
// request already did (for the same shopper) or the auction has no shopper.
func (a *auctionEnv) startCapRead() {
	cs := &a.st.caps
	user := a.r.OpaqueUserID
	if user == "" || (cs.read != nil && cs.mp == a.mp && cs.user == user) {
		return
	}
	// Another shopper's read of this request: its auctions are over, and
	// so is the read once its token is taken.
	r := cs.read
	if r == nil || !r.over() {
		r, cs.spare = cs.spare, nil
	}
	if r == nil {
		r = &capRead{done: make(chan struct{}, 1)}
	}
	r.taken, r.err = false, nil
	cs.mp, cs.user, cs.read = a.mp, user, r
	if a.e.Caps == nil {
		r.err = errors.New("no frequency cap view")
		r.done <- struct{}{}
		return
	}
	timeout := a.e.CapTimeout
	if timeout <= 0 {
		timeout = 20 * time.Millisecond
	}
	r.ctx, r.v, r.mp, r.user, r.at, r.loc, r.deadline = a.ctx, a.e.Caps, a.mp, user, a.at, a.m.Loc, time.Now().Add(timeout)
	go r.read()
}

// read reads the counts by the deadline (the client gives up at the
// context's deadline: redisstore sets ContextTimeoutEnabled).
func (r *capRead) read() {
	ctx, cancel := context.WithDeadline(r.ctx, r.deadline)
	r.err = r.v.Read(ctx, r.mp, r.user, r.at, r.loc, &r.counts)
	cancel()
	r.ctx, r.v = nil, nil
	r.done <- struct{}{}
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
		st.caps.read.wait()
		err = st.caps.read.err
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
			if st.caps.read.counts.Campaign(cp.Frequency, c.c.ID, cp.Kind) >= cp.Limit {
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
		if cp.Bid && a.st.caps.read.counts.Bid(cp.Frequency, c.c.ID, b.bidID, cp.Kind) >= cp.Limit {
			return true
		}
	}
	return false
}

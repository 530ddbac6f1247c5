package spend

import (
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
)

// Charge rules (docs/design/charges.md). Every time a rule reads was fixed before the
// projector saw the event (occurredAt, the API's receipt time, the signed
// auction time), so a replay decides exactly as the first pass did.
const (
	// ChargeSkew: an interaction dated up to this long before its auction is
	// still charged (client clocks run behind; the API accepts occurredAt up
	// to the same 5 minutes ahead).
	ChargeSkew = time.Duration(records.MaxFutureSkewMillis) * time.Millisecond
	// ChargeWindow: an interaction the API received more than this long
	// after its auction is not charged.
	ChargeWindow = 30 * 24 * time.Hour
	// ChargeMarkerMargin: how long Redis remembers a winner's charge beyond
	// its auction's charge window (see MarkerUntil).
	ChargeMarkerMargin = 48 * time.Hour
)

// MarkerEpoch is the group of c's charge markers in Redis: its auction's
// Unix hour (spend.Charge.Epoch). Every event of one winner carries the
// same token, so it finds the same group.
func MarkerEpoch(c *bidtoken.Claims) int64 {
	return c.AuctionTimeMs / time.Hour.Milliseconds()
}

// MarkerUntil is when Redis may forget that the winner of c was charged:
// ChargeMarkerMargin after the charge window of the last auction of its hour
// closed, which outlasts every record that can still be charged for that
// winner (received within ChargeWindow of the auction) plus the consumer lag
// and the replays of those records; and never sooner than ChargeMarkerMargin
// after now, to the next whole hour (a projector that is days behind still
// remembers its own charges while it may replay them). Whole hours: the
// markers of one auction hour share Redis hashes, which then get one expiry.
func MarkerUntil(c *bidtoken.Claims, now time.Time) time.Time {
	closes := time.UnixMilli((MarkerEpoch(c) + 1) * time.Hour.Milliseconds()).Add(ChargeWindow + ChargeMarkerMargin)
	if floor := now.Add(ChargeMarkerMargin); closes.Before(floor) {
		return floor.Truncate(time.Hour).Add(time.Hour)
	}
	return closes
}

// NoCharge says why a sponsored interaction is not charged; "" means it is
// chargeable.
type NoCharge string

// Reasons for not charging a sponsored interaction.
const (
	Chargeable NoCharge = ""
	// NoChargeBadToken: the resolvedBidId does not decode, or names another
	// marketplace (the API verified it, so this is a bug or a layout the
	// projector does not know).
	NoChargeBadToken NoCharge = "bad_token"
	// NoChargeKind: the winner is not billed for this kind (a CPC winner's
	// impression, a CPM winner's click).
	NoChargeKind NoCharge = "kind"
	// NoChargeBeforeAuction: occurredAt is more than ChargeSkew before the
	// auction ran.
	NoChargeBeforeAuction NoCharge = "before_auction"
	// NoChargeAfterWindow: received more than ChargeWindow after the auction.
	NoChargeAfterWindow NoCharge = "after_window"
	// NoChargeDuplicate: another event already charged this winner's
	// impression (or click), or was refused for a budget.
	NoChargeDuplicate NoCharge = "duplicate"
	// NoChargeDailyBudget: the charge would have taken the campaign's spend
	// of the interaction's local day over its daily budget.
	NoChargeDailyBudget NoCharge = "daily_budget"
	// NoChargeTotalBudget: the charge would have taken the campaign's total
	// spend over its total budget.
	NoChargeTotalBudget NoCharge = "total_budget"
	// NoChargeWeeklyBudget: the charge would have taken the campaign's
	// spend of the interaction's local week over its weekly budget.
	NoChargeWeeklyBudget NoCharge = "weekly_budget"
	// NoChargeMonthlyBudget: the same for the local month and its monthly
	// budget.
	NoChargeMonthlyBudget NoCharge = "monthly_budget"
)

// Refusal is the reason of a charge the script refused (for a budget or as
// an invalid click), "" when it did not.
func Refusal(o ChargeOutcome) NoCharge {
	switch o {
	case ChargeRefusedDaily:
		return NoChargeDailyBudget
	case ChargeRefusedTotal:
		return NoChargeTotalBudget
	case ChargeRefusedWeekly:
		return NoChargeWeeklyBudget
	case ChargeRefusedMonthly:
		return NoChargeMonthlyBudget
	case ChargeRefusedFunds:
		return NoChargeInsufficientBalance
	case ChargeInvalidNoImpression:
		return NoChargeInvalidNoImpression
	case ChargeInvalidTooFast:
		return NoChargeInvalidTooFast
	case ChargeInvalidRepeat:
		return NoChargeInvalidRepeat
	case ChargeInvalidRate:
		return NoChargeInvalidRate
	}
	return Chargeable
}

// ChargeRule decides whether a countable sponsored interaction of kind,
// which occurred and was received at the given Unix milliseconds, is charged
// under the token claims c. Events older than 30 days on arrival never get
// here (they are neither counted nor charged).
func ChargeRule(kind records.Kind, occurredMs, receivedMs int64, c *bidtoken.Claims) NoCharge {
	switch {
	case c.ChargeType == bidtoken.CPC && kind != records.KindClick,
		c.ChargeType == bidtoken.CPM && kind != records.KindImpression,
		c.ChargeType != bidtoken.CPC && c.ChargeType != bidtoken.CPM:
		return NoChargeKind
	case occurredMs < c.AuctionTimeMs-ChargeSkew.Milliseconds():
		return NoChargeBeforeAuction
	case receivedMs > c.AuctionTimeMs+ChargeWindow.Milliseconds():
		return NoChargeAfterWindow
	}
	return Chargeable
}

// ChargeAmount is what one interaction costs under c, in micro-units: a CPC
// click costs the cleared price; a CPM impression a thousandth of it, split
// into whole micro-units (floor) and the thousandths of a micro-unit left
// over (0..999). micros is what moves spend; micros + sub/1000 is exact.
func ChargeAmount(c *bidtoken.Claims) (micros int64, sub uint16) {
	if c.ChargeType == bidtoken.CPM {
		return c.PriceMicros / 1000, uint16(c.PriceMicros % 1000)
	}
	return c.PriceMicros, 0
}

// ChargeKey names a winner's interaction of one kind within its marketplace,
// in 18 bytes: the auction id, the rank and 'i' (impression) or 'c' (click).
// A winner is charged at most once per kind, whatever the event ids.
func ChargeKey(c *bidtoken.Claims, kind records.Kind) string {
	var b [18]byte
	copy(b[:16], c.AuctionID[:])
	b[16] = c.Rank
	b[17] = 'i'
	if kind == records.KindClick {
		b[17] = 'c'
	}
	return string(b[:])
}

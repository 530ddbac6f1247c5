package spend

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/endcap/endcap/auction/bidtoken"
)

// Invalid clicks (docs/design/charges.md, Invalid clicks). A CPC click that one of
// these rules finds invalid is recorded, not charged, with its reason; it
// moves no spend and takes its winner's marker like a charge (a later click
// on the same winner is a duplicate). The rules read only what the event
// carries and what the charge script keeps in the campaign's Redis slot, and
// the decision is kept in the winner's marker with the record that made it,
// so a replay decides as the first pass did whatever the state has become.
const (
	// NoChargeInvalidNoImpression: no impression of the click's winner
	// (the same auction and rank) was recorded before the click was
	// decided.
	NoChargeInvalidNoImpression NoCharge = "invalid_no_impression"
	// NoChargeInvalidTooFast: the click occurred less than
	// InvalidRules.MinClickDelay after its winner's first impression.
	NoChargeInvalidTooFast NoCharge = "invalid_too_fast"
	// NoChargeInvalidRepeat: the shopper's previous click on the same
	// campaign occurred less than InvalidRules.RepeatWindow before (or
	// after) this one.
	NoChargeInvalidRepeat NoCharge = "invalid_repeat_click"
	// NoChargeInvalidRate: the shopper had already clicked the campaign
	// InvalidRules.MaxClicksPerHour times in the click's UTC hour.
	NoChargeInvalidRate NoCharge = "invalid_click_rate"
)

// Outcomes of ApplyCharges for the invalid-click rules, and for the record
// of an impression. A refused click is remembered in its marker like a
// budget refusal: the same Owner again gets the same outcome, another Owner
// ChargeDuplicate.
const (
	ChargeInvalidNoImpression ChargeOutcome = ChargeRefusedTotal + 1 + iota
	ChargeInvalidTooFast
	ChargeInvalidRepeat
	ChargeInvalidRate
	// ChargeRecorded: a Charge with Impression set recorded its winner's
	// impression (or found an earlier one); nothing is charged.
	ChargeRecorded
)

// Invalid says whether the click was refused by an invalid-click rule.
func (o ChargeOutcome) Invalid() bool {
	return o >= ChargeInvalidNoImpression && o <= ChargeInvalidRate
}

// Marker values of clicks refused as invalid begin with these, followed by
// the Owner (the script's table refusedCodes has the same).
const (
	refusedNoImpression = "!n"
	refusedTooFast      = "!f"
	refusedRepeat       = "!r"
	refusedRate         = "!c"
)

// InvalidRules are the thresholds of the invalid-click rules. The zero value
// turns every rule off.
type InvalidRules struct {
	// RequireImpression refuses a click whose winner has no impression
	// recorded when the click is decided.
	RequireImpression bool
	// MinClickDelay refuses a click that occurred less than this after its
	// winner's first recorded impression (0: off). Milliseconds count.
	MinClickDelay time.Duration
	// RepeatWindow refuses a click of a shopper that occurred within this
	// of the latest click the same shopper made on the same campaign in the
	// same or the previous UTC hour (0: off; at most MaxRepeatWindow).
	RepeatWindow time.Duration
	// MaxClicksPerHour refuses the clicks of a shopper on one campaign
	// beyond this many in one UTC hour (0: off).
	MaxClicksPerHour int
}

// MaxRepeatWindow bounds InvalidRules.RepeatWindow: the script compares a
// click with the latest of its own and the previous hour.
const MaxRepeatWindow = time.Hour

// DefaultInvalidRules are the defaults of the settings
// (ENDCAP_INVALID_CLICK_*; docs/design/charges.md says where each comes from).
var DefaultInvalidRules = InvalidRules{
	RequireImpression: true,
	MinClickDelay:     250 * time.Millisecond,
	RepeatWindow:      time.Second,
	MaxClicksPerHour:  10,
}

// Validate reports thresholds the script cannot apply.
func (r InvalidRules) Validate() error {
	switch {
	case r.MinClickDelay < 0:
		return fmt.Errorf("minimum click delay %s is negative", r.MinClickDelay)
	case r.RepeatWindow < 0 || r.RepeatWindow > MaxRepeatWindow:
		return fmt.Errorf("repeat window %s out of range (0 to %s)", r.RepeatWindow, MaxRepeatWindow)
	case r.MaxClicksPerHour < 0:
		return fmt.Errorf("clicks per hour %d is negative", r.MaxClicksPerHour)
	}
	return nil
}

// On says whether any rule is on.
func (r InvalidRules) On() bool { return r != InvalidRules{} }

// NeedImpressions says whether the rules read the winners' impressions: the
// fold then records the impressions of CPC winners (Charge.Impression).
func (r InvalidRules) NeedImpressions() bool { return r.RequireImpression || r.MinClickDelay > 0 }

// arg is the rules as the script reads them, "<require>:<delay ms>:<repeat
// ms>:<max a hour>".
func (r InvalidRules) arg() string {
	req := "0"
	if r.RequireImpression {
		req = "1"
	}
	return req + ":" + strconv.FormatInt(r.MinClickDelay.Milliseconds(), 10) + ":" +
		strconv.FormatInt(r.RepeatWindow.Milliseconds(), 10) + ":" + strconv.Itoa(r.MaxClicksPerHour)
}

// ClickState is what the rules know when a click is decided: its winner's
// first recorded impression, and the shopper's clicks on the campaign.
type ClickState struct {
	ClickMs int64 // the click's occurredAt
	// Seen: an impression of the winner is recorded, the earliest at SeenMs.
	Seen   bool
	SeenMs int64
	// Last: the shopper clicked the campaign in the click's UTC hour or the
	// one before, the latest at LastMs (its hour's if it has one, else the
	// previous hour's).
	Last   bool
	LastMs int64
	// HourClicks is how many clicks of the shopper on the campaign were
	// decided before in the click's UTC hour.
	HourClicks int64
}

// JudgeClick is the invalid-click rule: why a click in state s is not
// charged under r, Chargeable when it is valid. The rules are checked in
// this order: no impression, too fast, repeat, rate. The charge script
// applies the same rule, in Redis, atomically with the click's marker and
// the state it reads (TestJudgeClickScript holds them to each other).
func JudgeClick(r InvalidRules, s ClickState) NoCharge {
	switch {
	case r.RequireImpression && !s.Seen:
		return NoChargeInvalidNoImpression
	case r.MinClickDelay > 0 && s.Seen && s.ClickMs-s.SeenMs < r.MinClickDelay.Milliseconds():
		return NoChargeInvalidTooFast
	case r.RepeatWindow > 0 && s.Last && absMs(s.ClickMs-s.LastMs) < r.RepeatWindow.Milliseconds():
		return NoChargeInvalidRepeat
	case r.MaxClicksPerHour > 0 && s.HourClicks >= int64(r.MaxClicksPerHour):
		return NoChargeInvalidRate
	}
	return Chargeable
}

func absMs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// ClickCheck subjects a Charge to the invalid-click rules (Charge.Click).
type ClickCheck struct {
	Rules InvalidRules
	// Shopper is the clicking shopper's opaqueUserId ("" skips the repeat
	// and the rate rules: nothing to count on). At most MaxShopper bytes.
	Shopper string
	// AtMs is the click's occurredAt (Unix milliseconds).
	AtMs int64
	// SeenKey is the key under which the winner's impression is recorded
	// (ImpressionKey); "" when the rules do not need it.
	SeenKey string
	// StateUntil is how long the shopper's counters of the click's hour
	// are kept (InvalidStateUntil).
	StateUntil time.Time
}

// MaxShopper bounds ClickCheck.Shopper (the API bounds opaqueUserId lower).
const MaxShopper = 512

// ImpressionKey names the record of a winner's impression in its campaign's
// marker hashes: the winner as in ChargeKey, and 's'.
func ImpressionKey(c *bidtoken.Claims) string {
	var b [18]byte
	copy(b[:16], c.AuctionID[:])
	b[16] = c.Rank
	b[17] = 's'
	return string(b[:])
}

// InvalidStateKept is how long a shopper's click counters of an hour are
// kept after the hour: a click that occurred more than this before it is
// decided (a late upload) is judged on the counters that are left. The
// decisions already made do not depend on it (their markers keep them).
const InvalidStateKept = ChargeMarkerMargin

// InvalidStateUntil is the expiry of the counters of the UTC hour of
// clickMs: InvalidStateKept after the hour, and never sooner than an hour
// after now.
func InvalidStateUntil(clickMs int64, now time.Time) time.Time {
	t := time.UnixMilli(clickMs).Truncate(time.Hour).Add(time.Hour + InvalidStateKept)
	if floor := now.Add(time.Hour).Truncate(time.Hour).Add(time.Hour); t.Before(floor) {
		return floor
	}
	return t
}

func (c *ClickCheck) validate() error {
	if c == nil {
		return nil
	}
	switch {
	case len(c.Shopper) > MaxShopper:
		return fmt.Errorf("shopper of %d bytes (at most %d)", len(c.Shopper), MaxShopper)
	case c.AtMs < 0:
		return fmt.Errorf("click time %d is negative", c.AtMs)
	case c.Rules.NeedImpressions() && c.SeenKey == "":
		return errors.New("the rules read impressions and the click names no SeenKey")
	case len(c.SeenKey) > MaxChargeKey:
		return fmt.Errorf("seen key of %d bytes (at most %d)", len(c.SeenKey), MaxChargeKey)
	}
	return c.Rules.Validate()
}

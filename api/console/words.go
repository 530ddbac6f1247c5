package console

import (
	"html/template"
	"strings"
	"time"

	"github.com/endcap/endcap/management/campaigns"
)

// --- times: the marketplace's zone, named ---

// localTime is the one way a page writes an instant: in the marketplace's
// zone loc, to the minute, with the zone named (its abbreviation, or its
// offset when the zone has none: "2026-03-01 09:30 CET", "2026-03-01 12:30
// +03"). "—" for the zero time.
func localTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

// timeHTML is localTime in a <time> element: its datetime attribute the
// instant (RFC 3339, UTC), its title the zone's IANA name.
func timeHTML(t time.Time, loc *time.Location) template.HTML {
	if t.IsZero() {
		return "—"
	}
	if loc == nil {
		loc = time.UTC
	}
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `" title="` + template.HTMLEscapeString(loc.String()) + `">` +
		template.HTMLEscapeString(localTime(t, loc)) + `</time>`)
}

// loc is the zone of the page's marketplace (UTC before sign-in).
func (p page) loc() *time.Location {
	if p.V == nil {
		return time.UTC
	}
	return p.V.Marketplace.Location()
}

// Time writes an instant in the marketplace's zone ({{$.Time .CreatedAt}}).
func (p page) Time(t time.Time) template.HTML { return timeHTML(t, p.loc()) }

// TimePtr is Time of an optional instant ("—" when nil).
func (p page) TimePtr(t *time.Time) template.HTML {
	if t == nil {
		return "—"
	}
	return timeHTML(*t, p.loc())
}

// Date is the day of an instant in the marketplace's zone (YYYY-MM-DD).
func (p page) Date(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(p.loc()).Format(time.DateOnly)
}

// Zone names the marketplace's zone (its IANA name).
func (p page) Zone() string { return p.loc().String() }

// --- codes in words ---

// statusReasons says each campaign status reason (campaigns.StatusReasons)
// in words.
var statusReasons = map[string]string{
	campaigns.ReasonArchived:           "Archived",
	campaigns.ReasonEnded:              "Ended: its end date has passed",
	campaigns.ReasonPaused:             "Paused",
	campaigns.ReasonScheduled:          "Scheduled: its start date is ahead",
	campaigns.ReasonNoBids:             "Not serving: it has no bid",
	campaigns.ReasonNoActiveBids:       "Not serving: none of its bids is active",
	campaigns.ReasonNoEligibleProducts: "Not serving: none of its active bids can win an auction (see each bid's eligibility)",
	campaigns.ReasonOutOfBudget:        "Not serving: its total budget is spent",
	campaigns.ReasonOutOfDailyBudget:   "Not serving today: its daily budget is spent",
	campaigns.ReasonOutOfWeeklyBudget:  "Not serving this week: its weekly budget is spent (until Monday)",
	campaigns.ReasonOutOfMonthlyBudget: "Not serving this month: its monthly budget is spent (until the 1st)",
	campaigns.ReasonPaced:              "Paced: it spent ahead of its budget's pace and sits auctions out until the pace catches up",
	campaigns.ReasonSpendUnavailable:   "Unknown: its spend cannot be read right now",
	campaigns.ReasonServing:            "Serving: it takes part in auctions",
}

// pacingWords says each pacing state (campaigns.Pacing*) in words, short
// (a figure of the page; the hint under it says what they mean).
var pacingWords = map[string]string{
	campaigns.PacingNoDailyBudget:      "Not paced",
	campaigns.PacingOnPace:             "On pace",
	campaigns.PacingAheadOfPace:        "Ahead of pace",
	campaigns.PacingDailyBudgetSpent:   "Budget spent",
	campaigns.PacingWeeklyBudgetSpent:  "Budget spent this week",
	campaigns.PacingMonthlyBudgetSpent: "Budget spent this month",
}

// periodWords says each budget period (campaigns.Budget*) as the time its
// amount is for ("12.00 a week").
var periodWords = map[string]string{
	campaigns.BudgetDaily:   "a day",
	campaigns.BudgetWeekly:  "a week",
	campaigns.BudgetMonthly: "a month",
}

// spentInWords says the time of the spend shown against a budget of each
// period (none: today's).
var spentInWords = map[string]string{
	campaigns.BudgetDaily:   "today",
	campaigns.BudgetWeekly:  "this week",
	campaigns.BudgetMonthly: "this month",
}

// wordTables are the tables the templates' "words" reads ({{words "pacing" .Pacing}}).
var wordTables = map[string]map[string]string{"reason": statusReasons, "pacing": pacingWords, "refused": refusedWords,
	"period": periodWords, "spentIn": spentInWords}

// words says a code in words: the table's sentence, else the code with
// its underscores as spaces and a capital.
func words(table map[string]string, code string) string {
	if s, ok := table[code]; ok {
		return s
	}
	if code == "" {
		return ""
	}
	s := strings.ReplaceAll(code, "_", " ")
	return strings.ToUpper(s[:1]) + s[1:]
}

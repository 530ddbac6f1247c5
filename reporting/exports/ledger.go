package exports

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
)

// The balance_ledger dataset (docs/reference/exports.md, docs/reference/balances.md): every
// movement of the vendors' balances in the window, one row each, in time
// order. Top-ups and credit-limit changes come from the ledger on the
// entities log (Options.Ledger); the charges drawn on the balances, and
// those refused for funds, from charges_raw (its drawn column and its
// insufficient_balance rows). Over a window that holds all of a vendor's
// movements, the amounts add up to its balance: Σ top-ups − Σ drawn
// charges = credited − charged.

// Kinds of ledger rows (the kind column).
const (
	LedgerTopUp         = "top_up"         // credited: amount > 0
	LedgerCreditLimit   = "credit_limit"   // the credit limit set: amount 0, credit_limit the new limit
	LedgerCharge        = "charge"         // drawn: amount < 0
	LedgerChargeRefused = "charge_refused" // refused for funds (insufficient_balance): amount 0
)

// LedgerMovement is a balance movement other than a charge: a top-up or a
// credit-limit change.
type LedgerMovement struct {
	ID          string
	VendorID    string // the vendor's catalog id
	Kind        string // LedgerTopUp or LedgerCreditLimit
	Micros      int64  // the top-up, or the new credit limit
	Description string
	At          time.Time
}

// Ledger is where the balance movements are read (the vendors' ledger on
// the entities log).
type Ledger interface {
	// EachMovement calls fn with every movement of marketplace mp, in any
	// order, until it returns false.
	EachMovement(mp string, fn func(LedgerMovement) bool)
}

var balanceLedger = &Dataset{
	Name:          DatasetBalanceLedger,
	Description:   "Every movement of the vendors' balances, one row each in time order: top-ups, credit-limit changes, the charges drawn on the balances and those refused for funds. Over all of a vendor's movements, the amounts add up to its balance.",
	Granularities: []string{GranularityMovement},
	Dimensions: []Dimension{
		{Name: "occurred_at", Kind: KindTimestamp, Description: "When the movement happened: a top-up or credit-limit change when it was recorded, a charge when its click or impression happened (the vendor charges' timestamp)."},
		{Name: "day_local", Kind: KindDate, Description: "The marketplace-local day of occurred_at."},
		{Name: "vendor_id", Kind: KindString, Description: "The vendor whose balance moved: its catalog id."},
		{Name: "movement_id", Kind: KindString, Description: "The movement: the id of a top-up or credit-limit change (the balance ledger's), the interactionId of a charge (the vendor charges')."},
		{Name: "kind", Kind: KindString, Description: "top_up, credit_limit, charge (drawn on the balance) or charge_refused (refused for funds: insufficient_balance)."},
		{Name: "description", Kind: KindString, Description: "The top-up's description; empty on other rows."},
		{Name: "campaign_id", Kind: KindString, Description: "The charged campaign; empty on top-ups and credit-limit changes."},
		{Name: "charge_type", Kind: KindString, Description: "CPC or CPM on charges; empty on other rows."},
		{Name: "currency_code", Kind: KindString, Description: "ISO 4217 currency of the amounts (the marketplace's)."},
	},
	Metrics: []Metric{
		{Name: "amount", Kind: KindMoney, Description: "What the movement did to the balance: + a top-up, − a charge's drawn amount (whole micro-units), 0 for a credit-limit change or a refused charge."},
		{Name: "credit_limit", Kind: KindPrice, Description: "The credit limit set by a credit-limit change; empty on other rows."},
	},
}

// ledgerRow is one row of a balance_ledger export: its string columns in
// text, at the places named by ledgerText.
type ledgerRow struct {
	at          time.Time
	text        [numLedgerText]string
	micros      int64
	limit       int64
	hasLimit    bool
	day         int64 // days since 1970-01-01
	sortAtMilli int64
}

// The places of the string columns in ledgerRow.text.
const (
	lVendor = iota
	lID
	lKind
	lDesc
	lCampaign
	lChargeType
	lCurrency
	numLedgerText
)

// ledgerText is the column of each place of ledgerRow.text.
var ledgerText = [numLedgerText]string{lVendor: "vendor_id", lID: "movement_id", lKind: "kind", lDesc: "description",
	lCampaign: "campaign_id", lChargeType: "charge_type", lCurrency: "currency_code"}

// The columns of a ledger row that are not in its text, as ledgerPlan.from
// names them (after text's places).
const (
	lOccurredAt = numLedgerText + iota
	lDay
	lAmount
	lCreditLimit
)

// ledgerPlan is a valid balance_ledger request: its columns and where each
// is read in a row (a place of ledgerRow.text, or lOccurredAt…).
type ledgerPlan struct {
	cols []Column
	from []int
}

func newLedgerPlan(r *Request) (*ledgerPlan, error) {
	p := &ledgerPlan{}
	for _, name := range r.Dimensions {
		d, ok := balanceLedger.Dimension(name)
		if !ok {
			return nil, fmt.Errorf("exports: unknown dimension %q", name)
		}
		p.cols = append(p.cols, Column{Name: d.Name, Kind: d.Kind})
	}
	for _, name := range r.Metrics {
		m, ok := balanceLedger.Metric(name)
		if !ok {
			return nil, fmt.Errorf("exports: unknown metric %q", name)
		}
		p.cols = append(p.cols, Column{Name: m.Name, Kind: m.Kind})
	}
	for _, c := range p.cols {
		from := slices.Index(ledgerText[:], c.Name)
		switch c.Name {
		case "occurred_at":
			from = lOccurredAt
		case "day_local":
			from = lDay
		case "amount":
			from = lAmount
		case "credit_limit":
			from = lCreditLimit
		}
		if from < 0 {
			return nil, fmt.Errorf("exports: no ledger value of column %q", c.Name)
		}
		p.from = append(p.from, from)
	}
	return p, nil
}

// movementRow is the row of a movement of the ledger on local day d.
func movementRow(m LedgerMovement, d time.Time, currency string) ledgerRow {
	r := ledgerRow{at: m.At, day: d.Unix() / 86400, sortAtMilli: m.At.UnixMilli()}
	r.text[lVendor], r.text[lID], r.text[lKind], r.text[lDesc], r.text[lCurrency] = m.VendorID, m.ID, m.Kind, m.Description, currency
	switch m.Kind {
	case LedgerTopUp:
		r.micros = m.Micros
	case LedgerCreditLimit:
		r.limit, r.hasLimit = m.Micros, true
	}
	return r
}

func (p *ledgerPlan) fill(row []cell, r *ledgerRow) {
	for i, from := range p.from {
		x := &row[i]
		*x = cell{}
		switch {
		case from < numLedgerText:
			x.s = r.text[from]
		case from == lOccurredAt:
			x.i = r.at.UnixMilli()
		case from == lDay:
			x.i = r.day
		case from == lAmount:
			x.m = microsOf(r.micros)
		case r.hasLimit:
			x.m = microsOf(r.limit)
		default:
			x.null = true
		}
	}
}

// ledgerCharges is the query of the charges of a balance_ledger export:
// those drawn on a balance and those refused for funds, in the window's
// local days (the timestamp bounds, a day wider on each side than any
// zone's, select the partitions), in time order.
const ledgerCharges = `SELECT toString(interaction_id), timestamp_ms, day_local, vendor_id, campaign_id, charge_type,
	currency_code, amount_micros, refused_reason
FROM charges_raw FINAL
WHERE marketplace_id = toUUID(?) AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)
  AND day_local >= toDate(?) AND day_local <= toDate(?)
  AND (drawn = 1 OR refused_reason = 'insufficient_balance')`

// ledgerRows calls fn with each row of a balance_ledger export of mp (of
// one vendor when vendor is set) in time order: the movements of the
// ledger and the charges of ClickHouse, merged.
func (s *Service) ledgerRows(ctx context.Context, mp, vendor string, r *Request, p *ledgerPlan, fn func(row []cell) error) error {
	start, end, err := window(r)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	loc := time.UTC
	if s.o.Location != nil {
		if l := s.o.Location(mp); l != nil {
			loc = l
		}
	}
	currency := ""
	if s.o.Currency != nil {
		currency = s.o.Currency(mp)
	}
	dayOf := func(t time.Time) time.Time {
		l := t.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)
	}
	var moves []ledgerRow
	if s.o.Ledger != nil {
		s.o.Ledger.EachMovement(mp, func(m LedgerMovement) bool {
			d := dayOf(m.At)
			if (vendor != "" && m.VendorID != vendor) || d.Before(start) || d.After(end) {
				return true
			}
			moves = append(moves, movementRow(m, d, currency))
			return true
		})
	}
	slices.SortFunc(moves, func(a, b ledgerRow) int {
		return cmp.Or(cmp.Compare(a.sortAtMilli, b.sortAtMilli), strings.Compare(a.text[lID], b.text[lID]))
	})

	q := ledgerCharges
	args := []any{mp, start.AddDate(0, 0, -1).Unix(), end.AddDate(0, 0, 2).Unix(), r.StartDate, r.EndDate}
	if vendor != "" {
		q += "\n  AND vendor_id = ?"
		args = append(args, vendor)
	}
	q += "\nORDER BY timestamp_ms, toString(interaction_id)"
	rows, err := s.o.ClickHouse.Query(clickhouse.Streaming(ctx, queryBlockRows, querySettings), q, args...)
	if err != nil {
		return fmt.Errorf("exports: ledger query: %w", err)
	}
	defer rows.Close()
	row := make([]cell, len(p.cols))
	emit := func(lr *ledgerRow) error {
		p.fill(row, lr)
		return fn(row)
	}
	var c ledgerRow
	var day time.Time
	var refused string
	for rows.Next() {
		if err := rows.Scan(&c.text[lID], &c.sortAtMilli, &day, &c.text[lVendor], &c.text[lCampaign], &c.text[lChargeType], &c.text[lCurrency], &c.micros, &refused); err != nil {
			return fmt.Errorf("exports: read ledger row: %w", err)
		}
		c.at, c.day, c.text[lKind] = time.UnixMilli(c.sortAtMilli).UTC(), day.Unix()/86400, LedgerCharge
		c.micros = -c.micros
		if refused != "" {
			c.text[lKind], c.micros = LedgerChargeRefused, 0
		}
		// The movements up to this charge first.
		for len(moves) > 0 && cmp.Or(cmp.Compare(moves[0].sortAtMilli, c.sortAtMilli), strings.Compare(moves[0].text[lID], c.text[lID])) < 0 {
			if err := emit(&moves[0]); err != nil {
				return err
			}
			moves = moves[1:]
		}
		if err := emit(&c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("exports: read ledger rows: %w", err)
	}
	for i := range moves {
		if err := emit(&moves[i]); err != nil {
			return err
		}
	}
	return nil
}

// ledgerFreshness waits (boundedly) for the projectors to fold what was
// acknowledged before: dataAsOf is the instant every charge acknowledged
// before it is in charges_raw (zero: unknown), partial says the window's
// last day had not ended by then.
func (s *Service) ledgerFreshness(ctx context.Context, mp string, r *Request, wo *WorkerOptions) (dataAsOf time.Time, partial bool, err error) {
	_, end, err := window(r)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: %w", errPermanent, err)
	}
	if wo.Folded != nil {
		if dataAsOf, err = wo.Folded(ctx); err != nil {
			return time.Time{}, false, err
		}
	}
	var loc *time.Location
	if s.o.Location != nil {
		loc = s.o.Location(mp)
	}
	return dataAsOf, dataAsOf.IsZero() || dataAsOf.Before(WindowEnd(end, loc)), nil
}

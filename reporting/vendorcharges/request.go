// Package vendorcharges serves GET /public/v1/billing-service/vendor-charges
// (docs/reference/vendor-charges.md): the charges of a marketplace in a time window,
// read from the ClickHouse table charges_raw (docs/design/charges.md) in a fixed
// order, batch by batch, so that memory stays bounded whatever the window.
// The HTTP handler (api/vendorcharges.go) only wires this package to Gin.
package vendorcharges

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
)

// Limits of a request.
const (
	// MaxWindow is the longest window: a calendar month in any time zone
	// (31 days and a daylight-saving hour) fits.
	MaxWindow = 32 * 24 * time.Hour
	// DefaultLimit and MaxLimit are the page sizes when the caller pages
	// (limit or next_page given). Without them the whole window is streamed.
	DefaultLimit = 1000
	MaxLimit     = 10_000
)

// cursorList names this list in its cursors.
const cursorList = "vendor-charges"

// Window is a half-open interval of charge timestamps, [StartMs, EndMs), in
// Unix milliseconds. Charges carry millisecond timestamps; a bound given
// with a finer fraction is rounded up to the next millisecond.
type Window struct {
	StartMs, EndMs int64
}

// Start and End are the bounds as times (UTC).
func (w Window) Start() time.Time { return time.UnixMilli(w.StartMs).UTC() }
func (w Window) End() time.Time   { return time.UnixMilli(w.EndMs).UTC() }

// scope ties a cursor to its window, whatever offsets the caller wrote it in.
func (w Window) scope() string {
	return strconv.FormatInt(w.StartMs, 10) + "-" + strconv.FormatInt(w.EndMs, 10)
}

// Position is a place in the list's order: after the charge with this
// timestamp and interaction id. The list is sorted by timestamp (ms), then
// by interaction id as text.
type Position struct {
	Ms            int64
	InteractionID string
}

func (p Position) encode() string { return strconv.FormatInt(p.Ms, 10) + "/" + p.InteractionID }

func parsePosition(s string) (Position, bool) {
	ms, id, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return Position{}, false
	}
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return Position{}, false
	}
	return Position{Ms: n, InteractionID: id}, true
}

// Request is a validated request.
type Request struct {
	Window Window
	// Limit is the page size; 0 means the whole window in one response.
	Limit int
	// After continues a paged list (nil: from the window's start).
	After *Position
	// IncludeRefused lists, among the charges, the interactions whose
	// charge was refused for a budget (amount 0, refusedReason): the query
	// parameter include_refused, an Endcap extension.
	IncludeRefused bool
}

// Envelope is what a response to r says besides its charges, for the
// marketplace's id and currency.
func (r Request) Envelope(marketplaceID, currencyCode string) Envelope {
	return Envelope{MarketplaceID: marketplaceID, Window: r.Window, CurrencyCode: currencyCode, IncludeRefused: r.IncludeRefused}
}

// Paged says whether the caller asked for pages.
func (r Request) Paged() bool { return r.Limit > 0 }

// NextPage is the cursor that continues r's list after last.
func (r Request) NextPage(s *pagination.Signer, marketplaceID string, last Position) string {
	return s.Encode(pagination.Cursor{List: cursorList, Marketplace: marketplaceID, Scope: r.Window.scope(), After: last.encode()})
}

// ParseRequest validates the query parameters: start_date and end_date
// (required, RFC 3339 with a time zone, end after start, at most MaxWindow
// apart), limit (1..MaxLimit), next_page (a cursor issued for this
// marketplace and this same window) and include_refused (true or false,
// 1 or 0; false by default). Every problem is reported, as
// validation.Errors with loc ["query", name]. A cursor is a position in
// the list's order, which is the same with and without the refused
// charges: include_refused applies to each page it is sent with.
func ParseRequest(q url.Values, marketplaceID string, cursors *pagination.Signer) (Request, error) {
	var errs validation.Errors
	start, okStart := parseBound(q, "start_date", &errs)
	end, okEnd := parseBound(q, "end_date", &errs)
	r := Request{Window: Window{StartMs: ceilMs(start), EndMs: ceilMs(end)}}
	okWindow := okStart && okEnd
	if okWindow {
		switch {
		case r.Window.EndMs <= r.Window.StartMs:
			errs.Add(validation.ValueError, "end_date must be after start_date", "query", "end_date")
			okWindow = false
		case end.Sub(start) > MaxWindow:
			errs.Add(validation.ValueError, "the window from start_date to end_date must be at most 32 days", "query", "end_date")
			okWindow = false
		}
	}
	if s, present := firstValue(q, "limit"); present {
		r.Limit = validation.QueryLimit(&errs, s, true, r.Limit, MaxLimit)
	}
	if s, present := firstValue(q, "include_refused"); present {
		switch strings.ToLower(s) {
		case "true", "1":
			r.IncludeRefused = true
		case "false", "0":
		default:
			errs.Add("bool_parsing", "Input should be a valid boolean, unable to interpret input", "query", "include_refused")
		}
	}
	if tok, present := firstValue(q, "next_page"); present && tok != "" {
		if r.Limit == 0 {
			r.Limit = DefaultLimit
		}
		// A cursor belongs to one window: it is checked once the window is valid.
		if okWindow {
			c, err := cursors.Decode(tok, cursorList, marketplaceID, r.Window.scope())
			pos, ok := parsePosition(c.After)
			if err != nil || !ok {
				errs.Add(validation.ValueError, "next_page is not a cursor issued by this service for this list and this start_date and end_date", "query", "next_page")
			} else {
				r.After = &pos
			}
		}
	}
	if err := errs.Err(); err != nil {
		return Request{}, err
	}
	return r, nil
}

func firstValue(q url.Values, name string) (string, bool) {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// parseBound reads one required date-time parameter.
func parseBound(q url.Values, name string, errs *validation.Errors) (time.Time, bool) {
	s, present := firstValue(q, name)
	if !present {
		errs.Add(validation.Missing, "Field required", "query", name)
		return time.Time{}, false
	}
	t, err := timestamp.Parse(s)
	switch {
	case errors.Is(err, timestamp.ErrNoZone):
		errs.Add(TypeTimezoneAware, "Input should have timezone info: add Z or an offset such as +01:00", "query", name)
		return time.Time{}, false
	case err != nil:
		errs.Add(TypeDateTimeParsing, "Input should be a valid RFC 3339 datetime with a time zone (Z or an offset such as +01:00), e.g. 2026-03-01T00:00:00.000Z", "query", name)
		return time.Time{}, false
	}
	return t, true
}

// Error types of a date-time parameter (pydantic's names, as the rest of
// the API).
const (
	TypeDateTimeParsing = "datetime_parsing"
	TypeTimezoneAware   = "timezone_aware"
)

// ceilMs is t in Unix milliseconds, rounded up.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

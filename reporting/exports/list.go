package exports

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/timestamp"
)

// Page sizes of GET /export-service/exports.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
)

// Error codes of the list's query parameters (docs/reference/exports.md).
const (
	CodeInvalidStatus   = "invalid_status"   // not an export status
	CodeInvalidDateTime = "invalid_datetime" // created_from / created_to not RFC 3339 with a zone
	CodeInvalidRange    = "invalid_created_range"
	CodeInvalidLimit    = "invalid_limit"
	CodeInvalidCursor   = "invalid_cursor"
)

// listCursor names the list in its cursors.
const listCursor = "exports"

// ListQuery is a validated GET /export-service/exports.
type ListQuery struct {
	Status  Status // "": every status
	Dataset string // "": every dataset
	// CreatedFromMs (inclusive) and CreatedToMs (exclusive) bound createdAt,
	// in Unix milliseconds; 0 when not given.
	CreatedFromMs, CreatedToMs int64
	Limit                      int
	// After continues the list after this export (nil: from the newest).
	After *Position
	// VendorID, when set, lists only the exports requested for that vendor
	// (its users' list); "" lists every export of the marketplace.
	VendorID string
}

// Position is a place in the list's order, newest first: createdAt (ms),
// then exportId, both descending.
type Position struct {
	CreatedMs int64
	ID        string
}

func positionOf(e Export) Position { return Position{CreatedMs: e.CreatedAt.UnixMilli(), ID: e.ID} }

// before says whether p comes before q in the list's order.
func (p Position) before(q Position) bool {
	return p.CreatedMs > q.CreatedMs || (p.CreatedMs == q.CreatedMs && p.ID > q.ID)
}

func (p Position) encode() string { return strconv.FormatInt(p.CreatedMs, 10) + "/" + p.ID }

func parsePosition(s string) (Position, bool) {
	ms, id, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return Position{}, false
	}
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return Position{}, false
	}
	return Position{CreatedMs: n, ID: id}, true
}

// scope ties a cursor to the list's filters.
func (q ListQuery) scope() string {
	s := string(q.Status) + "|" + q.Dataset + "|" + strconv.FormatInt(q.CreatedFromMs, 10) + "|" + strconv.FormatInt(q.CreatedToMs, 10)
	if q.VendorID != "" {
		s += "|vendor:" + q.VendorID
	}
	return s
}

// NextPage is the cursor that continues q's list after last.
func (q ListQuery) NextPage(cursors *pagination.Signer, marketplaceID string, last Position) string {
	return cursors.Encode(pagination.Cursor{List: listCursor, Marketplace: marketplaceID, Scope: q.scope(), After: last.encode()})
}

// ParseListQuery validates the query parameters of the list: status,
// dataset, created_from (inclusive) and created_to (exclusive), RFC 3339
// date-times with a time zone, limit (1..MaxListLimit, DefaultListLimit),
// and next_page (a cursor issued for this marketplace and these same
// filters). A parameter given empty is absent; one given twice is refused.
// Every problem is reported, in that order of parameters.
func ParseListQuery(q url.Values, marketplaceID string, cursors *pagination.Signer) (ListQuery, []Problem) {
	return ParseVendorListQuery(q, marketplaceID, "", cursors)
}

// ParseVendorListQuery is ParseListQuery for the list of one vendor's
// exports (vendor "": every export of the marketplace); a cursor of one
// vendor's list is not valid in another's.
func ParseVendorListQuery(q url.Values, marketplaceID, vendor string, cursors *pagination.Signer) (ListQuery, []Problem) {
	var probs []Problem
	add := func(code, field, msg string, v any) {
		probs = append(probs, Problem{Code: code, Field: field, Message: msg, Value: v})
	}
	get := func(name string) (string, bool) {
		vs := q[name]
		switch {
		case len(vs) > 1:
			add(CodeInvalidRequest, name, name+" may be given once.", nil)
			return "", false
		case len(vs) == 0 || vs[0] == "":
			return "", false
		}
		return vs[0], true
	}
	lq := ListQuery{Limit: DefaultListLimit, VendorID: vendor}
	if v, ok := get("status"); ok {
		switch st := Status(v); st {
		case StatusPending, StatusRunning, StatusCompleted, StatusFailed:
			lq.Status = st
		default:
			add(CodeInvalidStatus, "status", `status must be one of "pending", "running", "completed", "failed".`, v)
		}
	}
	if v, ok := get("dataset"); ok {
		if _, known := DatasetByName(v); known {
			lq.Dataset = v
		} else {
			add(CodeInvalidDataset, "dataset", datasetMessage, v)
		}
	}
	bound := func(name string) (int64, bool) {
		v, ok := get(name)
		if !ok {
			return 0, true
		}
		t, err := timestamp.Parse(v)
		switch {
		case err != nil:
			add(CodeInvalidDateTime, name, name+" must be an RFC 3339 date-time with a time zone (Z or an offset such as +01:00), e.g. 2026-03-01T00:00:00.000Z.", v)
			return 0, false
		case t.Year() < 1970 || t.Year() > 9999:
			add(CodeInvalidDateTime, name, name+" must be between 1970 and 9999.", v)
			return 0, false
		}
		return ceilMs(t), true
	}
	var okFrom, okTo bool
	lq.CreatedFromMs, okFrom = bound("created_from")
	lq.CreatedToMs, okTo = bound("created_to")
	if okFrom && okTo && lq.CreatedFromMs > 0 && lq.CreatedToMs > 0 && lq.CreatedToMs <= lq.CreatedFromMs {
		add(CodeInvalidRange, "created_to", "created_to must be after created_from.", q.Get("created_to"))
	}
	if v, ok := get("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			add(CodeInvalidLimit, "limit", "limit must be an integer from 1 to "+strconv.Itoa(MaxListLimit)+".", v)
		} else {
			lq.Limit = n
		}
	}
	if v, ok := get("next_page"); ok && len(probs) == 0 {
		// A cursor belongs to one list: it is checked once the filters are valid.
		c, err := cursors.Decode(v, listCursor, marketplaceID, lq.scope())
		pos, okPos := parsePosition(c.After)
		if err != nil || !okPos {
			add(CodeInvalidCursor, "next_page", "next_page is not a cursor issued by this service for this list and these filters.", nil)
		} else {
			lq.After = &pos
		}
	}
	return lq, probs
}

// ceilMs is t in Unix milliseconds, rounded up: createdAt has millisecond
// precision, so createdAt ≥ t and createdAt ≥ ceilMs(t) agree, and so do
// the strict comparisons.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// keep says whether an export is in q's list (filters and position).
func (q ListQuery) keep(e Export) bool {
	ms := e.CreatedAt.UnixMilli()
	switch {
	case q.Status != "" && e.Status != q.Status,
		q.Dataset != "" && e.Dataset != q.Dataset,
		q.VendorID != "" && e.VendorID != q.VendorID,
		q.CreatedFromMs > 0 && ms < q.CreatedFromMs,
		q.CreatedToMs > 0 && ms >= q.CreatedToMs,
		q.After != nil && !q.After.before(positionOf(e)):
		return false
	}
	return true
}

// Page is a page of the list.
type Page struct {
	Exports []View
	HasMore bool
	Last    Position // of the page's last export, when HasMore
}

// List returns the page of mp's exports that q asks for, newest first,
// each as GET answers it (a completed one with a fresh presigned URL).
func (s *Service) List(ctx context.Context, mp string, q ListQuery) (Page, error) {
	var matched []Export
	s.items.Each(mp, func(_ string, e Export) bool {
		if q.keep(e) {
			matched = append(matched, e)
		}
		return true
	})
	page, more := firstPage(matched, q.Limit)
	out := Page{Exports: make([]View, 0, len(page)), HasMore: more}
	for _, e := range page {
		v, err := s.ViewOf(ctx, e)
		if err != nil {
			return Page{}, err
		}
		out.Exports = append(out.Exports, v)
	}
	if more {
		out.Last = positionOf(page[len(page)-1])
	}
	return out, nil
}

// firstPage sorts exports newest first and returns the first limit, and
// whether more follow.
func firstPage(exports []Export, limit int) ([]Export, bool) {
	slices.SortFunc(exports, func(a, b Export) int {
		pa, pb := positionOf(a), positionOf(b)
		switch {
		case pa.before(pb):
			return -1
		case pb.before(pa):
			return 1
		}
		return 0
	})
	if len(exports) > limit {
		return exports[:limit], true
	}
	return exports, false
}

package campaigns

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/validation"
)

// The marketplace-wide list of campaigns (GET /campaign-service/campaigns):
// every campaign of a marketplace in id (creation) order, filtered by
// vendor, status, type and name. A marketplace holds up to hundreds of
// thousands of campaigns, and a filter that matches few of them reads them
// all, so the list keeps, beside the campaigns, what its filters read of
// each (listEntry) in id order: a page is a scan of that array under a
// read lock, without sorting, map lookups or copies of campaigns.

// listEntry is what the list's filters read of a campaign: copies of its
// fields (the strings and times share the campaign's memory), updated in
// place under s.mu at every change.
type listEntry struct {
	id, vendorID, name, typ string
	startDate               time.Time
	endDate, archivedAt     *time.Time
	active                  bool
	gone                    bool // removed from the log: skipped until the next rebuild
}

func (e *listEntry) set(c *Campaign) {
	e.id, e.vendorID, e.name, e.typ = c.ID, c.VendorID, c.Name, c.Type
	e.startDate, e.endDate, e.archivedAt, e.active = c.StartDate, c.EndDate, c.ArchivedAt, c.Active
}

// listIndex is one marketplace's entries: sorted by id, and pending, the
// entries of the campaigns created since, merged in by the next list. A
// campaign removed from the log (the API never does) is marked gone and
// the next list rebuilds sorted.
type listIndex struct {
	byID    map[string]*listEntry
	sorted  []*listEntry
	pending []*listEntry
	rebuild bool
	slab    []listEntry // entries are allocated in chunks (fewer objects for the garbage collector)
}

// listChunk is how many entries one allocation holds.
const listChunk = 256

// indexList records a campaign's change (under s.mu).
func (s *Service) indexList(mp, id string, nw *Campaign) {
	x := s.lists[mp]
	if x == nil {
		if nw == nil {
			return
		}
		x = &listIndex{byID: map[string]*listEntry{}}
		s.lists[mp] = x
	}
	e := x.byID[id]
	switch {
	case nw == nil && e != nil:
		e.gone = true
		delete(x.byID, id)
		x.rebuild = true
	case nw != nil && e == nil:
		if len(x.slab) == 0 {
			x.slab = make([]listEntry, listChunk)
		}
		e = &x.slab[0]
		x.slab = x.slab[1:]
		e.set(nw)
		x.byID[id] = e
		x.pending = append(x.pending, e)
	case nw != nil:
		e.set(nw)
	}
}

// settleList merges the pending entries of mp into its sorted ones (or
// rebuilds them), so that a scan under the read lock sees every campaign.
func (s *Service) settleList(mp string) {
	s.mu.RLock()
	x := s.lists[mp]
	due := x != nil && (len(x.pending) > 0 || x.rebuild)
	s.mu.RUnlock()
	if !due {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case x.rebuild:
		es := make([]*listEntry, 0, len(x.byID))
		for _, e := range x.byID {
			es = append(es, e)
		}
		sort.Slice(es, func(i, j int) bool { return es[i].id < es[j].id })
		x.sorted, x.pending, x.rebuild = es, nil, false
	case len(x.pending) > 0:
		x.sorted = mergeSorted(x.sorted, x.pending)
		x.pending = nil
	}
}

// mergeSorted returns a new slice holding sorted and the entries of add
// (any order), by id; add is sorted in place.
func mergeSorted(sorted, add []*listEntry) []*listEntry {
	sort.Slice(add, func(i, j int) bool { return add[i].id < add[j].id })
	out := make([]*listEntry, 0, len(sorted)+len(add))
	i, j := 0, 0
	for i < len(sorted) && j < len(add) {
		if sorted[i].id <= add[j].id {
			out = append(out, sorted[i])
			i++
		} else {
			out = append(out, add[j])
			j++
		}
	}
	out = append(out, sorted[i:]...)
	return append(out, add[j:]...)
}

// Limits of the list's filters.
const (
	MaxFilterLen = 255 // vendor_id and name, in characters
)

// Filter selects the campaigns of the marketplace-wide list. Zero values
// select everything; within statuses and types any value matches, and the
// filters that are set must all match.
type Filter struct {
	VendorID string   // the campaign's vendorId, exactly (Resolve names it so)
	Statuses []string // its status at the time of the request (Status)
	Types    []string // its type
	// Name is a case-insensitive substring of the campaign's name: the
	// filter as given, trimmed and lower-cased (Unicode lower case).
	Name string
}

// ParseFilter reads a list's filters from its query: vendor_id, status and
// type (each a comma-separated list of values, or the parameter repeated)
// and name. It returns a 422 error naming every bad parameter.
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	var errs validation.Errors
	single := func(name string, trim bool) (string, bool) {
		vs, ok := q[name]
		if !ok {
			return "", false
		}
		if len(vs) > 1 {
			errs.Add(validation.ValueError, "Give "+name+" once", "query", name)
			return "", false
		}
		v := vs[0]
		if !textOK(v, &errs, name) {
			return "", false
		}
		if trim {
			v = strings.TrimSpace(v)
		}
		switch n := utf8.RuneCountInString(v); {
		case n == 0:
			errs.Add("string_too_short", "String should have at least 1 character", "query", name)
		case n > MaxFilterLen:
			errs.Add("string_too_long", "String should have at most "+strconv.Itoa(MaxFilterLen)+" characters", "query", name)
		default:
			return v, true
		}
		return "", false
	}
	enum := func(name string, allowed []string) []string {
		var out []string
		for _, v := range q[name] {
			if !textOK(v, &errs, name) {
				return nil
			}
			for _, item := range strings.Split(v, ",") {
				item = strings.ToLower(strings.TrimSpace(item))
				if !slices.Contains(allowed, item) {
					errs.Add("enum", "Input should be "+quoteList(allowed)+" (comma-separated)", "query", name)
					return nil
				}
				if !slices.Contains(out, item) {
					out = append(out, item)
				}
			}
		}
		sort.Strings(out)
		return out
	}
	f.VendorID, _ = single("vendor_id", false)
	if name, ok := single("name", true); ok {
		f.Name = strings.ToLower(name)
	}
	f.Statuses = enum("status", Statuses)
	f.Types = enum("type", Types)
	return f, errs.Err()
}

// textOK adds an error at query.name when v is not Unicode text without NUL.
func textOK(v string, errs *validation.Errors, name string) bool {
	switch {
	case !utf8.ValidString(v):
		errs.Add("string_unicode", "String must be valid UTF-8", "query", name)
	case strings.IndexByte(v, 0) >= 0:
		errs.Add(validation.ValueError, "String must not contain NUL", "query", name)
	default:
		return true
	}
	return false
}

// quoteList renders values as 'a', 'b' or 'c'.
func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + v + "'"
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Resolve returns f with its vendor named by its catalog id (VendorID),
// whether the filter named it by that id or by its internal UUID, so that
// both select the same campaigns and share cursors. A vendor VendorID does
// not know stays as given: it matches no campaign.
func (s *Service) Resolve(mp string, f Filter) Filter {
	if f.VendorID != "" {
		if id, err := s.VendorID(mp, f.VendorID); err == nil {
			f.VendorID = id
		}
	}
	return f
}

// Scope identifies the filters, for the list's cursors: a cursor continues
// only the list of the same filters. It is a hash, so that a long name
// does not make a long cursor.
func (f Filter) Scope() string {
	sum := sha256.Sum256([]byte("v=" + f.VendorID + "\x00s=" + strings.Join(f.Statuses, ",") +
		"\x00t=" + strings.Join(f.Types, ",") + "\x00n=" + f.Name))
	return hex.EncodeToString(sum[:12])
}

// Match reports whether c passes the filters at now.
func (f Filter) Match(c Campaign, now time.Time) bool {
	var e listEntry
	e.set(&c)
	return f.match(&e, now)
}

func (f Filter) match(e *listEntry, now time.Time) bool {
	return (f.VendorID == "" || e.vendorID == f.VendorID) &&
		(len(f.Types) == 0 || slices.Contains(f.Types, e.typ)) &&
		(len(f.Statuses) == 0 || slices.Contains(f.Statuses, statusAt(e.archivedAt, e.endDate, e.active, e.startDate, now))) &&
		(f.Name == "" || containsLower(e.name, f.Name))
}

// containsLower reports whether the lower case of s contains sub (lower
// case already), without allocating when s is ASCII.
func containsLower(s, sub string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), sub)
		}
	}
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for j < n && lowerASCII(s[i+j]) == sub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lowerASCII(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// ListAll returns up to limit campaigns of a marketplace that pass f at
// the time of the call, in id (creation) order after the id after, and
// whether more follow.
func (s *Service) ListAll(mp string, f Filter, after string, limit int) ([]Campaign, bool) {
	now := s.now()
	s.settleList(mp)
	out := make([]Campaign, 0, limit)
	for {
		// The ids that pass the filters as the index has them, then their
		// campaigns, checked again: a change between the two (rare) drops
		// one, and the scan goes on after it.
		ids, done := s.scanList(mp, f, after, limit+1-len(out), now)
		for _, id := range ids {
			if c, _, ok := s.campaigns.Get(mp, id); ok && f.Match(c, now) {
				out = append(out, c)
			}
		}
		if len(out) > limit {
			return out[:limit], true
		}
		if done || len(ids) == 0 {
			return out, false
		}
		after = ids[len(ids)-1]
	}
}

// scanList returns up to n ids of mp's campaigns after the id after that
// pass f at now, in order, and whether the scan reached the end.
func (s *Service) scanList(mp string, f Filter, after string, n int, now time.Time) ([]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.lists[mp]
	if x == nil {
		return nil, true
	}
	var es []*listEntry
	if f.VendorID != "" {
		// One vendor's campaigns: their entries only, sorted here.
		for id := range s.byVendor[mp][f.VendorID] {
			if e := x.byID[id]; e != nil && id > after {
				es = append(es, e)
			}
		}
		sort.Slice(es, func(i, j int) bool { return es[i].id < es[j].id })
	} else {
		es = x.sorted[sort.Search(len(x.sorted), func(i int) bool { return x.sorted[i].id > after }):]
	}
	ids := make([]string, 0, min(n, 128))
	for i, e := range es {
		if e.gone || !f.match(e, now) {
			continue
		}
		ids = append(ids, e.id)
		if len(ids) == n {
			return ids, i == len(es)-1
		}
	}
	return ids, true
}

package statelog

import (
	"math"
	"strconv"
	"strings"
)

// IfMatch is a write's precondition on the entity's version, from its
// If-Match header (docs/reference/management-api.md), the one rule of every area:
// MatchAny, a version, or MatchNone. A type of its own, so that a write
// cannot be handed a Write's Expected (AnyVersion) by mistake.
type IfMatch int64

const (
	// MatchAny is the If-Match of a write that expects no version (no
	// If-Match, or "*"): it writes whatever the entity's version.
	MatchAny IfMatch = 0
	// MatchNone is the If-Match of a write whose If-Match names no version
	// this service writes: no entity matches it (409), and it never
	// writes. It is not AnyVersion, so passing it on as a write's Expected
	// version is safe.
	MatchNone IfMatch = math.MinInt64
)

// ParseIfMatch reads an If-Match header: MatchAny when it is empty or "*",
// the version n for "<n>", W/"<n>" or a bare n (n ≥ 1), and MatchNone for
// anything else.
func ParseIfMatch(header string) IfMatch {
	v := strings.TrimSpace(header)
	if v == "" || v == "*" {
		return MatchAny
	}
	n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil || n < 1 {
		return MatchNone
	}
	return IfMatch(n)
}

// Matches says whether a write with If-Match ifMatch may go ahead on an
// entity at version ver (exists false: there is none). MatchAny matches
// everything, a version only the entity at that version.
func Matches(ifMatch IfMatch, exists bool, ver int64) bool {
	return ifMatch == MatchAny || (exists && int64(ifMatch) == ver)
}

package chdb

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/endcap/endcap/storage/clickhouse/chrecord"
)

// Settings of a replay: results come as JSON with every value in
// a form chrecord.Canon reads (DateTime as Unix seconds, numbers unquoted),
// the text of a statement may be as long as 18.16 accepted (the recorded
// code raised max_query_size for its long IN lists), and a mutation is
// done when its ALTER returns: on 18.16 the code waits for it by polling
// system.mutations, and the replay runs the polls right after.
var sessionSettings = []string{
	"SET date_time_output_format = 'unix_timestamp'",
	"SET output_format_json_quote_64bit_integers = 0",
	"SET output_format_json_quote_decimals = 0",
	"SET output_format_json_quote_denormals = 1",
	"SET max_query_size = 104857600",
	"SET mutations_sync = 2",
}

// Mismatch is a statement the two engines did not treat alike.
type Mismatch struct {
	Stmt chrecord.Statement
	What string
}

func (m Mismatch) String() string {
	q := m.Stmt.SQL
	if len(q) > 3000 {
		q = q[:3000] + " …"
	}
	return fmt.Sprintf("statement %d (%s): %s\n    %s", m.Stmt.Seq, m.Stmt.Kind, m.What, q)
}

// Report is what a replay found.
type Report struct {
	Statements int // replayed
	Compared   int // queries whose rows were compared
	ByKind     map[chrecord.Kind]int
	Mismatches []Mismatch
	Took       time.Duration
	SameShape  int // reads not replayed (Accept): one of the same Shape was
}

var (
	stringLiteral = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)
	numberLiteral = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b`)
	literalList   = regexp.MustCompile(`([SN])(?:\s*,\s*[SN])+`)
)

// Shape is a statement with its literals replaced by their kind (S for a
// string, N for a number), lists of literals by one, and spaces collapsed:
// the statements a test sends with other values have the same shape.
func Shape(q string) string {
	q = stringLiteral.ReplaceAllString(q, "S")
	q = numberLiteral.ReplaceAllString(q, "N")
	q = literalList.ReplaceAllString(q, "$1…")
	return strings.TrimSpace(spaces.ReplaceAllString(q, " "))
}

// Replay runs stmts, as recorded on another server in database, in order
// on e in a database of the same name (created, and made current), and
// compares: a statement either engine refused is a mismatch, and so is a
// query whose result columns or rows differ (as Compare says). tz is the
// recorded server's time zone: the engine takes it, so that functions
// of DateTime without a zone answer alike.
func Replay(ctx context.Context, e *Engine, database string, tz *time.Location, stmts []chrecord.Statement) Report {
	return replay(ctx, e, database, tz, stmts, true)
}

// Accept is Replay checking acceptance only: a statement the recorded server
// refused is skipped (tests of faults make some fail on purpose), a
// statement e refuses is a mismatch, and no result is compared. It is what
// ENDCAP_TEST_CHDB=1 runs after every test (CheckTest), where the
// statements of concurrent goroutines of a test and of its servers' faults
// make results incomparable.
func Accept(ctx context.Context, e *Engine, database string, tz *time.Location, stmts []chrecord.Statement) Report {
	return replay(ctx, e, database, tz, stmts, false)
}

func replay(ctx context.Context, e *Engine, database string, tz *time.Location, stmts []chrecord.Statement, compare bool) Report {
	e.replayMu.Lock()
	defer e.replayMu.Unlock()
	start := time.Now()
	rep := Report{ByKind: map[chrecord.Kind]int{}}
	setup := append([]string{"CREATE DATABASE IF NOT EXISTS " + database, "USE " + database}, sessionSettings...)
	if tz != nil && tz.String() != "Local" {
		setup = append(setup, "SET session_timezone = '"+tz.String()+"'")
	}
	for _, q := range setup {
		if err := e.Exec(ctx, q); err != nil {
			rep.Mismatches = append(rep.Mismatches, Mismatch{chrecord.Statement{Kind: chrecord.Exec, SQL: q}, "refused by " + e.Version() + ": " + err.Error()})
			return rep
		}
	}
	seen := map[string]bool{}
	for _, s := range stmts {
		if !compare && s.Kind == chrecord.Query {
			// A read changes nothing: for acceptance, one of each shape is
			// enough (a test that pages through a scan sends thousands).
			k := Shape(s.SQL)
			if seen[k] {
				rep.SameShape++
				continue
			}
			seen[k] = true
		}
		rep.Statements++
		rep.ByKind[s.Kind]++
		if s.Err != "" {
			if compare {
				rep.Mismatches = append(rep.Mismatches, Mismatch{s, "refused by the recorded server: " + s.Err})
			}
			continue
		}
		var out string
		var err error
		switch s.Kind {
		case chrecord.Batch:
			if s.RowCount == 0 {
				continue
			}
			var body []byte
			if body, err = s.RowsJSON(); err == nil {
				err = e.Exec(ctx, s.SQL+" FORMAT JSONEachRow\n"+string(body))
			}
		case chrecord.Exec:
			err = e.Exec(ctx, s.SQL)
		case chrecord.Query:
			out, err = e.Query(ctx, s.SQL, "JSONCompactEachRowWithNamesAndTypes")
		}
		if err != nil {
			rep.Mismatches = append(rep.Mismatches, Mismatch{s, "refused by " + e.Version() + ": " + err.Error()})
			continue
		}
		if s.Kind != chrecord.Query || !compare {
			continue
		}
		what, compared := Compare(s, out)
		if compared {
			rep.Compared++
		}
		if what != "" {
			rep.Mismatches = append(rep.Mismatches, Mismatch{s, what})
		}
	}
	rep.Took = time.Since(start)
	return rep
}

// systemTable: a query of the engine's own state (parts, mutations,
// merges…), which differs between engines and between runs by nature.
var systemTable = regexp.MustCompile(`(?i)\bsystem\.\w+`)

// Compare compares a recorded query with out, its result on the other
// engine (JSONCompactEachRowWithNamesAndTypes, with the replay's
// settings). It returns what differs ("" for nothing) and whether rows were
// compared. What it tolerates, and why:
//   - a query of system tables is compared by its columns only;
//   - Nullable and LowCardinality around a column's type (chrecord.Canon);
//   - the order of rows of a query without a top-level ORDER BY, which
//     ClickHouse does not define; when such a query has a LIMIT, which rows
//     are kept is not defined either, and only their number is compared;
//   - when the code stopped reading early (QueryRow, or a loop that broke
//     off), the rows it read must come first (ORDER BY) or appear (without)
//     in the other engine's result;
//   - a query whose rows the code read other than by Scan (Select,
//     ScanStruct) is compared by its columns only.
func Compare(s chrecord.Statement, out string) (what string, compared bool) {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var names, types []string
	if err := dec.Decode(&names); err != nil {
		return fmt.Sprintf("result without a header: %v: %.300q", err, out), false
	}
	if err := dec.Decode(&types); err != nil {
		return fmt.Sprintf("result without types: %v: %.300q", err, out), false
	}
	if d := diffColumns(s.Names, s.Types, names, types); d != "" {
		return d, false
	}
	if systemTable.MatchString(s.SQL) || !s.Captured {
		return "", false
	}
	var got [][]string
	for dec.More() {
		var row []any
		if err := dec.Decode(&row); err != nil {
			return fmt.Sprintf("result row %d: %v", len(got)+1, err), false
		}
		c := make([]string, len(row))
		for i, v := range row {
			c[i] = chrecord.Canon(types[i], v)
		}
		got = append(got, c)
	}
	want := s.Result
	ordered, limited := shape(s.SQL)
	switch {
	case !ordered && limited:
		if s.Complete && len(got) != len(want) {
			return fmt.Sprintf("%d rows, recorded %d (LIMIT without ORDER BY: only the count is compared)", len(got), len(want)), true
		}
		return "", true
	case !s.Complete:
		if ordered {
			if len(got) < len(want) || !slices.EqualFunc(got[:len(want)], want, slices.Equal) {
				return "the rows read first differ:\n" + rowsDiff(want, got), true
			}
			return "", true
		}
		if !contains(got, want) {
			return "the rows read are not all in the result:\n" + rowsDiff(want, got), true
		}
		return "", true
	case !ordered:
		want, got = sortedRows(want), sortedRows(got)
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		return "rows differ:\n" + rowsDiff(want, got), true
	}
	return "", true
}

// diffColumns compares a result's columns: names, and types up to
// Nullable and LowCardinality wrappers that the driver scans alike
// (a Nullable column into a non-pointer fails, and shows as a difference of
// values when it matters).
func diffColumns(wantNames, wantTypes, names, types []string) string {
	if len(wantNames) != len(names) {
		return fmt.Sprintf("columns %v %v, recorded %v %v", names, types, wantNames, wantTypes)
	}
	for i := range names {
		wt, gt := normType(wantTypes[i]), normType(types[i])
		if wantNames[i] != names[i] || wt != gt {
			return fmt.Sprintf("column %d is %s %s, recorded %s %s", i+1, names[i], types[i], wantNames[i], wantTypes[i])
		}
	}
	return ""
}

var spaces = regexp.MustCompile(`\s+`)

// normType removes the spaces and every Nullable(…) and LowCardinality(…)
// wrapper of a type, wherever it is (Array(Nullable(String)) is
// Array(String)).
func normType(t string) string {
	t = spaces.ReplaceAllString(t, "")
	for _, w := range []string{"LowCardinality(", "Nullable("} {
		for {
			i := strings.Index(t, w)
			if i < 0 {
				break
			}
			depth, end := 1, -1
			for j := i + len(w); j < len(t) && end < 0; j++ {
				switch t[j] {
				case '(':
					depth++
				case ')':
					if depth--; depth == 0 {
						end = j
					}
				}
			}
			if end < 0 {
				break
			}
			t = t[:i] + t[i+len(w):end] + t[end+1:]
		}
	}
	return t
}

// shape says whether the query's outermost SELECT has an ORDER BY and a
// LIMIT (outside parentheses and quotes; LIMIT … BY does not count).
func shape(q string) (ordered, limited bool) {
	depth := 0
	var quote byte
	upper := strings.ToUpper(q)
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		case c == '\'' || c == '"' || c == '`':
			quote = c
			continue
		case c == '(':
			depth++
			continue
		case c == ')':
			depth--
			continue
		}
		if depth != 0 || (i > 0 && isWord(q[i-1])) {
			continue
		}
		switch {
		case strings.HasPrefix(upper[i:], "ORDER BY"):
			ordered = true
		case strings.HasPrefix(upper[i:], "LIMIT") && (i+5 == len(q) || !isWord(q[i+5])):
			if !limitBy(upper[i+5:]) {
				limited = true
			}
		}
	}
	return ordered, limited
}

// limitBy: the text after LIMIT is "n [, m] BY …".
func limitBy(rest string) bool {
	f := strings.Fields(rest)
	for i, w := range f {
		if i > 3 {
			break
		}
		if w == "BY" {
			return true
		}
	}
	return false
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func sortedRows(rows [][]string) [][]string {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	return out
}

// contains: every row of want is in got, as many times.
func contains(got, want [][]string) bool {
	n := map[string]int{}
	for _, r := range got {
		n[strings.Join(r, "\x00")]++
	}
	for _, r := range want {
		k := strings.Join(r, "\x00")
		if n[k] == 0 {
			return false
		}
		n[k]--
	}
	return true
}

// rowsDiff shows both sides, up to 10 rows each.
func rowsDiff(want, got [][]string) string {
	show := func(rows [][]string) string {
		var b strings.Builder
		for i, r := range rows {
			if i == 10 {
				fmt.Fprintf(&b, "\n      … %d rows in all", len(rows))
				break
			}
			fmt.Fprintf(&b, "\n      %v", r)
		}
		if len(rows) == 0 {
			b.WriteString(" (none)")
		}
		return b.String()
	}
	return "    recorded:" + show(want) + "\n    replayed:" + show(got)
}

package chrecord

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// TestCanonBothSides: a value scanned by the driver and the same value in a
// JSON result (as the replay reads it) have one canonical form.
func TestCanonBothSides(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	at := time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC)
	s := "x"
	var nilStr *string
	id := uuid.MustParse("6f1c9f3e-8c5e-4e59-9f64-1d2b3c4d5e6f")
	for _, c := range []struct {
		typ       string
		goValue   any
		jsonValue string
		want      string
	}{
		{"DateTime('UTC')", at, `"1772955000"`, "1772955000"},
		{"DateTime('America/New_York')", at.In(ny), `"1772955000"`, "1772955000"},
		{"Date", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), `"2026-03-08"`, "2026-03-08"},
		{"UInt64", uint64(18446744073709551615), `18446744073709551615`, "18446744073709551615"},
		{"Int64", int64(-5), `-5`, "-5"},
		{"Float64", 0.1 + 0.2, `0.30000000000000004`, "0.3"},
		{"Float32", float32(1.5), `1.5`, "1.5"},
		{"Decimal(18, 6)", decimal.RequireFromString("1.500000"), `1.5`, "1.5"},
		{"Decimal(18, 6)", decimal.Zero, `0`, "0"},
		{"Nullable(String)", &s, `"x"`, "x"},
		{"Nullable(String)", nilStr, `null`, "NULL"},
		{"LowCardinality(String)", "a", `"a"`, "a"},
		{"Array(String)", []string{"a", "b"}, `["a","b"]`, "[a,b]"},
		{"Array(UInt32)", []uint32{}, `[]`, "[]"},
		{"UUID", id, `"6f1c9f3e-8c5e-4e59-9f64-1d2b3c4d5e6f"`, id.String()},
		{"Enum8('impression' = 1, 'click' = 2)", "click", `"click"`, "click"},
		{"UInt8", true, `1`, "1"},
	} {
		var j any
		dec := json.NewDecoder(strings.NewReader(c.jsonValue))
		dec.UseNumber()
		if err := dec.Decode(&j); err != nil {
			t.Fatal(err)
		}
		g, js := Canon(c.typ, c.goValue), Canon(c.typ, j)
		if g != c.want || js != c.want {
			t.Errorf("%s: Go %v → %q, JSON %s → %q; want %q", c.typ, c.goValue, g, c.jsonValue, js, c.want)
		}
	}
}

// TestJSONValue: a batch's values as the replay sends them in JSONEachRow.
func TestJSONValue(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	at := time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC).In(ny)
	for _, c := range []struct {
		typ  string
		v    any
		want string
	}{
		{"DateTime('UTC')", at, `1772955000`},
		{"Date", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), `"2026-03-08"`},
		{"Decimal(18, 6)", decimal.RequireFromString("2.25"), `"2.25"`},
		{"Array(Nullable(String))", []*string{nil}, `[null]`},
		{"UInt64", uint64(7), `7`},
		{"String", "a\"b", `"a\"b"`},
		{"Array(DateTime)", []time.Time{at}, `[1772955000]`},
	} {
		if got := string(jsonValue(c.typ, c.v)); got != c.want {
			t.Errorf("%s %v: %s, want %s", c.typ, c.v, got, c.want)
		}
	}
}

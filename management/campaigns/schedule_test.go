package campaigns

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/validation"
)

func TestNormalizeNegative(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Running Shoes", "running shoe"},
		{"  running   SHOES!! ", "running shoe"},
		{"running-shoes", "running shoe"},
		{"kid's shoes", "kid s shoe"},
		{"glass", "glass"},    // "ss" is not a plural
		{"bus", "bus"},        // under 4 characters
		{"boots", "boot"},     // plural folded
		{"Straße", "straße"},  // Unicode letters kept, lower case
		{"ÉCLAIRS", "éclair"}, // Unicode lower case
		{"4k tvs 55in", "4k tvs 55in"},
		{"!!!", ""},
		{"", ""},
	} {
		if got := NormalizeNegative(tc.in); got != tc.want {
			t.Errorf("NormalizeNegative(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNegativesBlock(t *testing.T) {
	n := CompileNegatives([]NegativeKeyword{
		{Keyword: NormalizeNegative("cheap shoes"), MatchType: MatchExact},
		{Keyword: NormalizeNegative("free"), MatchType: MatchPhrase},
		{Keyword: NormalizeNegative("used cars"), MatchType: MatchPhrase},
	})
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"cheap shoes", true},
		{"Cheap Shoe", true},       // plural and case
		{"cheap, shoes!", true},    // punctuation
		{"cheap red shoes", false}, // exact: the whole query only
		{"shoes cheap", false},     // exact: in order
		{"free", true},             // phrase: alone
		{"shoes for free", true},   // phrase: anywhere
		{"freedom", false},         // phrase: whole words
		{"used car dealer", true},  // phrase of two words, plural folded
		{"used red cars", false},   // phrase: next to each other
		{"", false},                // no query
	} {
		if got := n.Blocks(NewQuery(tc.query)); got != tc.want {
			t.Errorf("%q: blocked %v, want %v", tc.query, got, tc.want)
		}
	}
	var none *Negatives
	if none.Blocks(NewQuery("anything")) || CompileNegatives(nil) != nil {
		t.Error("no negatives block nothing")
	}
}

func TestNegativeKeywordsValidation(t *testing.T) {
	in := func(body string) NegativeKeywordsInput {
		var v NegativeKeywordsInput
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	got, err := negativeKeywords(in(`{"negativeKeywords":[{"keyword":"Free","matchType":"PHRASE"},{"keyword":"cheap  shoes","matchType":"exact"},
		{"keyword":"free","matchType":"phrase"},{"keyword":"free","matchType":"exact"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []NegativeKeyword{{"cheap shoe", "exact"}, {"free", "exact"}, {"free", "phrase"}}
	if !slices.Equal(got, want) {
		t.Errorf("normalised %v, want %v", got, want)
	}
	long := `"` + strings.Repeat("a", MaxNegativeKeywordLen+1) + `"`
	for _, tc := range []struct {
		body string
		typ  string
		loc  string
	}{
		{`{}`, validation.Missing, "body.negativeKeywords"},
		{`{"negativeKeywords":null}`, "list_type", "body.negativeKeywords"},
		{`{"negativeKeywords":[{"keyword":"x"}]}`, validation.Missing, "body.negativeKeywords.0.matchType"},
		{`{"negativeKeywords":[{"keyword":"x","matchType":"broad"}]}`, "enum", "body.negativeKeywords.0.matchType"},
		{`{"negativeKeywords":[{"matchType":"exact"}]}`, validation.Missing, "body.negativeKeywords.0.keyword"},
		{`{"negativeKeywords":[{"keyword":"--","matchType":"exact"}]}`, "string_too_short", "body.negativeKeywords.0.keyword"},
		{`{"negativeKeywords":[{"keyword":` + long + `,"matchType":"exact"}]}`, "string_too_long", "body.negativeKeywords.0.keyword"},
		{`{"negativeKeywords":[{"keyword":"a b c d e","matchType":"phrase"}]}`, validation.ValueError, "body.negativeKeywords.0.keyword"},
		{`{"negativeKeywords":[{"keyword":"a b c d e f g h i j k","matchType":"exact"}]}`, validation.ValueError, "body.negativeKeywords.0.keyword"},
	} {
		_, err := negativeKeywords(in(tc.body))
		if !hasError(err, tc.typ, tc.loc) {
			t.Errorf("%s: %v, want %s at %s", tc.body, err, tc.typ, tc.loc)
		}
	}
	if _, err := negativeKeywords(in(`{"negativeKeywords":[{"keyword":"a b c d","matchType":"phrase"},{"keyword":"a b c d e f g h i j","matchType":"exact"}]}`)); err != nil {
		t.Errorf("at the word limits: %v", err)
	}
}

func TestTimetableValidation(t *testing.T) {
	s := &Service{}
	in := func(body string) TimetablesInput {
		var v TimetablesInput
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		body string
		typ  string
		loc  string
	}{
		{`{}`, validation.Missing, "body.timetables"},
		{`{"timetables":[]}`, "too_short", "body.timetables"},
		{`{"timetables":[{"day_of_week":0,"start_hour":0,"end_hour":24}]}`, "greater_than_equal", "body.timetables.0.day_of_week"},
		{`{"timetables":[{"day_of_week":8,"start_hour":0,"end_hour":24}]}`, "less_than_equal", "body.timetables.0.day_of_week"},
		{`{"timetables":[{"day_of_week":1,"start_hour":24,"end_hour":24}]}`, "less_than_equal", "body.timetables.0.start_hour"},
		{`{"timetables":[{"day_of_week":1,"start_hour":0,"end_hour":25}]}`, "less_than_equal", "body.timetables.0.end_hour"},
		{`{"timetables":[{"day_of_week":1,"start_hour":9,"end_hour":9}]}`, validation.ValueError, "body.timetables.0.end_hour"},
		{`{"timetables":[{"day_of_week":1,"start_hour":9}]}`, validation.Missing, "body.timetables.0.end_hour"},
		{`{"timetables":[{"day_of_week":1,"start_hour":9,"end_hour":17},{"day_of_week":1,"start_hour":0,"end_hour":1}]}`, validation.ValueError, "body.timetables.1.day_of_week"},
	} {
		_, _, err := s.PutTimetables(context.Background(), "mp", "c", 0, in(tc.body))
		if !hasError(err, tc.typ, tc.loc) {
			t.Errorf("%s: %v, want %s at %s", tc.body, err, tc.typ, tc.loc)
		}
	}
	if _, err := ParseDaysOfWeek([]string{"1,7", "3"}); err != nil {
		t.Error(err)
	}
	if _, err := ParseDaysOfWeek([]string{"1,8"}); !hasError(err, "less_than_equal", "query.day_of_week") {
		t.Errorf("day 8: %v", err)
	}
	h := ServedHours([]TimetableDay{{1, 9, 17}, {7, 0, 24}})
	if h[0] != 0xff<<9 || h[6] != 1<<24-1 || h[1] != 0 {
		t.Errorf("served hours %x", *h)
	}
	if ServedHours(nil) != nil {
		t.Error("no timetable: every hour")
	}
}

// hasError reports whether err is a validation error with an entry of typ
// at loc (dot-joined).
func hasError(err error, typ, loc string) bool {
	errs, ok := validation.As(err)
	if !ok {
		return false
	}
	for _, e := range errs {
		parts := make([]string, len(e.Loc))
		for i, l := range e.Loc {
			parts[i] = fmt.Sprint(l)
		}
		if e.Type == typ && strings.Join(parts, ".") == loc {
			return true
		}
	}
	return false
}

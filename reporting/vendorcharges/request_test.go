package vendorcharges

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/validation"
)

func TestParseRequest(t *testing.T) {
	signer := pagination.NewSigner([]byte("a test key of at least 16 bytes"))
	win := Window{StartMs: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), EndMs: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	cursor := Request{Window: win}.NextPage(signer, "mp-a", Position{Ms: win.StartMs + 5, InteractionID: "0b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60"})
	otherWin := Request{Window: Window{StartMs: win.StartMs, EndMs: win.EndMs - 1}}.NextPage(signer, "mp-a", Position{Ms: win.StartMs, InteractionID: "0b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60"})
	badAfter := signer.Encode(pagination.Cursor{List: cursorList, Marketplace: "mp-a", Scope: win.scope(), After: "x/y"})
	const march = "start_date=2026-03-01T00:00:00Z&end_date=2026-04-01T00:00:00Z"
	for _, tc := range []struct {
		name, query string
		want        Request
		errs        []string // "loc:type"
	}{
		{"whole window", march, Request{Window: win}, nil},
		{"same instants in other offsets", "start_date=2026-03-01T01:00:00%2B01:00&end_date=2026-03-31T17:00:00-07:00", Request{Window: win}, nil},
		{"sub-millisecond bounds round up", "start_date=2026-03-01T00:00:00.0000001Z&end_date=2026-03-01T00:00:00.001Z",
			Request{Window: Window{StartMs: win.StartMs + 1, EndMs: win.StartMs + 1}}, []string{"query.end_date:value_error"}},
		{"a limit pages", march + "&limit=10", Request{Window: win, Limit: 10}, nil},
		{"a cursor pages with the default limit", march + "&next_page=" + cursor,
			Request{Window: win, Limit: DefaultLimit, After: &Position{Ms: win.StartMs + 5, InteractionID: "0b8f2d4a-93c1-4f0e-8a57-2e1d9c3b7f60"}}, nil},
		{"empty next_page is no cursor", march + "&next_page=", Request{Window: win}, nil},
		{"nothing", "", Request{}, []string{"query.start_date:missing", "query.end_date:missing"}},
		{"naive dates", "start_date=2026-03-01T00:00:00&end_date=2026-03-02", Request{},
			[]string{"query.start_date:timezone_aware", "query.end_date:timezone_aware"}},
		{"garbage", "start_date=soon&end_date=", Request{}, []string{"query.start_date:datetime_parsing", "query.end_date:datetime_parsing"}},
		{"end before start", "start_date=2026-03-02T00:00:00Z&end_date=2026-03-01T00:00:00Z", Request{}, []string{"query.end_date:value_error"}},
		{"end at start", "start_date=2026-03-01T01:00:00%2B01:00&end_date=2026-03-01T00:00:00Z", Request{}, []string{"query.end_date:value_error"}},
		{"32 days", "start_date=2026-03-01T00:00:00Z&end_date=2026-04-02T00:00:00Z", Request{Window: Window{win.StartMs, win.EndMs + 86_400_000}}, nil},
		{"over 32 days", "start_date=2026-03-01T00:00:00Z&end_date=2026-04-02T00:00:00.001Z", Request{}, []string{"query.end_date:value_error"}},
		{"bad limits", march + "&limit=0", Request{}, []string{"query.limit:greater_than_equal"}},
		{"limit too big", march + "&limit=10001", Request{}, []string{"query.limit:less_than_equal"}},
		{"limit not a number", march + "&limit=ten", Request{}, []string{"query.limit:int_parsing"}},
		{"forged cursor", march + "&next_page=abc", Request{}, []string{"query.next_page:value_error"}},
		{"cursor of another window", march + "&next_page=" + otherWin, Request{}, []string{"query.next_page:value_error"}},
		{"cursor with a bad position", march + "&next_page=" + badAfter, Request{}, []string{"query.next_page:value_error"}},
		{"include_refused", march + "&include_refused=true", Request{Window: win, IncludeRefused: true}, nil},
		{"include_refused=1", march + "&include_refused=1", Request{Window: win, IncludeRefused: true}, nil},
		{"include_refused=FALSE", march + "&include_refused=FALSE", Request{Window: win}, nil},
		{"include_refused=0 with pages", march + "&include_refused=0&limit=5", Request{Window: win, Limit: 5}, nil},
		{"include_refused not a boolean", march + "&include_refused=yes please", Request{}, []string{"query.include_refused:bool_parsing"}},
		{"include_refused empty", march + "&include_refused=", Request{}, []string{"query.include_refused:bool_parsing"}},
		{"everything wrong at once", "start_date=2026-03-01&limit=-1", Request{},
			[]string{"query.start_date:timezone_aware", "query.end_date:missing", "query.limit:greater_than_equal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseRequest(q, "mp-a", signer)
			var locs []string
			if v, ok := validation.As(err); ok {
				for _, e := range v {
					parts := make([]string, len(e.Loc))
					for i, l := range e.Loc {
						parts[i] = fmt.Sprint(l)
					}
					if e.Msg == "" {
						t.Errorf("no message: %+v", e)
					}
					locs = append(locs, strings.Join(parts, ".")+":"+e.Type)
				}
			} else if err != nil {
				t.Fatalf("not a validation error: %v", err)
			}
			if !slices.Equal(locs, tc.errs) {
				t.Fatalf("errors %v, want %v", locs, tc.errs)
			}
			if tc.errs == nil && (got.Window != tc.want.Window || got.Limit != tc.want.Limit || got.IncludeRefused != tc.want.IncludeRefused) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got.After != nil && (tc.want.After == nil || *got.After != *tc.want.After) {
				t.Fatalf("after %+v, want %+v", got.After, tc.want.After)
			}
		})
	}
	// A cursor of another marketplace is refused.
	q, _ := url.ParseQuery(march + "&next_page=" + cursor)
	if _, err := ParseRequest(q, "mp-b", signer); err == nil {
		t.Fatal("a cursor of another marketplace was accepted")
	}
}

func TestWindowBoundsInSeconds(t *testing.T) {
	s := New(nil)
	for _, tc := range []struct {
		start, end, after int64 // ms
		from, to          int64 // s
		done              bool
	}{
		{1000, 2000, 0, 1, 2, false},
		{1000, 2001, 0, 1, 3, false},
		{999, 1000, 0, 0, 1, false},
		{-5000, 1, 0, 0, 1, false},
		{-5000, 0, 0, 0, 0, true},
		{1000, 9000, 8999, 8, 9, false},
	} {
		var after *Position
		if tc.after != 0 {
			after = &Position{Ms: tc.after, InteractionID: "x"}
		}
		it := s.Scan("mp", Window{tc.start, tc.end}, after)
		if it.from != tc.from || it.end != tc.to || it.done != tc.done {
			t.Errorf("window [%d, %d) after %d: seconds [%d, %d) done %v; want [%d, %d) %v", tc.start, tc.end, tc.after, it.from, it.end, it.done, tc.from, tc.to, tc.done)
		}
	}
}

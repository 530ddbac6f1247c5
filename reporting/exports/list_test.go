package exports

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/pagination"
)

func TestParseListQuery(t *testing.T) {
	const mp = "0b5e8f1a-6b0c-4a39-9f0e-6f2d7d0c1a11"
	signer := pagination.NewSigner([]byte("test key"))
	id := "019abcde-0000-7000-8000-000000000001"
	filters := ListQuery{Status: StatusCompleted, Dataset: DatasetMonitoringMetrics, CreatedFromMs: 1_767_225_600_000, Limit: DefaultListLimit}
	cursor := filters.NextPage(signer, mp, Position{CreatedMs: 1_767_225_600_500, ID: id})
	filtersQuery := "status=completed&dataset=monitoring_metrics&created_from=2026-01-01T00:00:00Z"
	otherKey := ListQuery{Status: StatusCompleted, Dataset: DatasetMonitoringMetrics, CreatedFromMs: 1_767_225_600_000}.
		NextPage(pagination.NewSigner([]byte("another key")), mp, Position{CreatedMs: 1, ID: id})
	tampered := []byte(cursor)
	tampered[len(tampered)/2] ^= 1
	badPosition := signer.Encode(pagination.Cursor{List: listCursor, Marketplace: mp, Scope: filters.scope(), After: "12/not-a-uuid"})

	for _, tc := range []struct {
		name  string
		query string
		want  string // the problems as code@field, comma-separated; or the query as %+v-ish
	}{
		{"nothing", "", "ok limit=50"},
		{"empty values are absent", "status=&dataset=&created_from=&created_to=&limit=&next_page=", "ok limit=50"},
		{"every filter", "status=failed&dataset=monitoring_metrics&created_from=2026-01-01T00:00:00%2B01:00&created_to=2026-01-02T00:00:00.0001Z&limit=100",
			"ok status=failed dataset=monitoring_metrics from=1767222000000 to=1767312000001 limit=100"},
		{"a + sent as a space", "created_from=2026-01-01T00:00:00 01:00", "ok from=1767222000000 limit=50"},
		{"each status", "status=pending", "ok status=pending limit=50"},
		{"running", "status=running", "ok status=running limit=50"},
		{"unknown status", "status=done", "invalid_status@status"},
		{"status is case-sensitive", "status=Completed", "invalid_status@status"},
		{"unknown dataset", "dataset=campaign_metrics", "invalid_dataset@dataset"},
		{"no zone", "created_from=2026-01-01T00:00:00", "invalid_datetime@created_from"},
		{"a date", "created_to=2026-01-01", "invalid_datetime@created_to"},
		{"not a time", "created_from=yesterday", "invalid_datetime@created_from"},
		{"before 1970", "created_from=1969-12-31T23:59:59Z", "invalid_datetime@created_from"},
		{"to before from", "created_from=2026-01-02T00:00:00Z&created_to=2026-01-01T00:00:00Z", "invalid_created_range@created_to"},
		{"to equal to from", "created_from=2026-01-02T00:00:00Z&created_to=2026-01-02T01:00:00%2B01:00", "invalid_created_range@created_to"},
		{"limit 0", "limit=0", "invalid_limit@limit"},
		{"limit 101", "limit=101", "invalid_limit@limit"},
		{"limit 1", "limit=1", "ok limit=1"},
		{"limit not a number", "limit=ten", "invalid_limit@limit"},
		{"limit negative", "limit=-1", "invalid_limit@limit"},
		{"limit huge", "limit=99999999999999999999", "invalid_limit@limit"},
		{"twice", "status=failed&status=completed", "invalid_request@status"},
		{"every problem, in order", "status=x&dataset=y&created_from=z&created_to=2026-01-01&limit=0&next_page=" + url.QueryEscape(cursor),
			"invalid_status@status,invalid_dataset@dataset,invalid_datetime@created_from,invalid_datetime@created_to,invalid_limit@limit"},
		{"a cursor of its list", filtersQuery + "&next_page=" + cursor, "ok status=completed dataset=monitoring_metrics from=1767225600000 limit=50 after=1767225600500/" + id},
		{"a cursor and a page size", filtersQuery + "&limit=7&next_page=" + cursor, "ok status=completed dataset=monitoring_metrics from=1767225600000 limit=7 after=1767225600500/" + id},
		{"a cursor of other filters", "status=completed&next_page=" + cursor, "invalid_cursor@next_page"},
		{"a cursor without its filters", "next_page=" + cursor, "invalid_cursor@next_page"},
		{"a tampered cursor", filtersQuery + "&next_page=" + string(tampered), "invalid_cursor@next_page"},
		{"a cursor signed with another key", filtersQuery + "&next_page=" + otherKey, "invalid_cursor@next_page"},
		{"a cursor with a bad position", filtersQuery + "&next_page=" + badPosition, "invalid_cursor@next_page"},
		{"garbage", "next_page=%00%01", "invalid_cursor@next_page"},
		{"very long", "next_page=" + strings.Repeat("A", 5000), "invalid_cursor@next_page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			lq, probs := ParseListQuery(q, mp, signer)
			var got string
			if len(probs) > 0 {
				var codes []string
				for _, p := range probs {
					if p.Message == "" {
						t.Errorf("%s: no message", p.Field)
					}
					codes = append(codes, p.Code+"@"+p.Field)
				}
				got = strings.Join(codes, ",")
			} else {
				got = "ok"
				if lq.Status != "" {
					got += " status=" + string(lq.Status)
				}
				if lq.Dataset != "" {
					got += " dataset=" + lq.Dataset
				}
				if lq.CreatedFromMs != 0 {
					got += fmt.Sprintf(" from=%d", lq.CreatedFromMs)
				}
				if lq.CreatedToMs != 0 {
					got += fmt.Sprintf(" to=%d", lq.CreatedToMs)
				}
				got += fmt.Sprintf(" limit=%d", lq.Limit)
				if lq.After != nil {
					got += " after=" + lq.After.encode()
				}
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// Another marketplace's cursor.
	q, _ := url.ParseQuery(filtersQuery + "&next_page=" + cursor)
	if _, probs := ParseListQuery(q, "7d4f0c7e-6a37-4bb4-8a0a-1e1f5b8c3d22", signer); len(probs) != 1 || probs[0].Code != CodeInvalidCursor {
		t.Errorf("another marketplace's cursor: %+v", probs)
	}
}

// The list is newest first (createdAt, then exportId, descending), filtered,
// and continues after a position without repeating or skipping an export.
func TestListOrder(t *testing.T) {
	base := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	mk := func(id string, ms int, st Status) Export {
		return Export{ID: "019abcde-0000-7000-8000-00000000000" + id, CreatedAt: base.Add(time.Duration(ms) * time.Millisecond),
			Status: st, Dataset: DatasetMonitoringMetrics}
	}
	all := []Export{mk("1", 0, StatusCompleted), mk("2", 5, StatusFailed), mk("3", 5, StatusCompleted), mk("4", 9, StatusPending),
		mk("5", -3, StatusCompleted), mk("6", 5, StatusRunning)}
	ids := func(es []Export) string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID[len(e.ID)-1:])
		}
		return strings.Join(out, "")
	}
	list := func(q ListQuery) (string, bool, Position) {
		var kept []Export
		for _, e := range all {
			if q.keep(e) {
				kept = append(kept, e)
			}
		}
		page, more := firstPage(kept, q.Limit)
		var last Position
		if len(page) > 0 {
			last = positionOf(page[len(page)-1])
		}
		return ids(page), more, last
	}
	// Paging by 2 reads every export once, newest first.
	var got []string
	q := ListQuery{Limit: 2}
	for range 10 {
		page, more, last := list(q)
		got = append(got, page)
		if !more {
			break
		}
		q.After = &last
	}
	if s := strings.Join(got, "|"); s != "46|32|15" {
		t.Errorf("pages %s, want 46|32|15", s)
	}
	for _, tc := range []struct {
		name string
		q    ListQuery
		want string
	}{
		{"all", ListQuery{Limit: 100}, "463215"},
		{"completed", ListQuery{Limit: 100, Status: StatusCompleted}, "315"},
		{"from (inclusive)", ListQuery{Limit: 100, CreatedFromMs: base.UnixMilli() + 5}, "4632"},
		{"to (exclusive)", ListQuery{Limit: 100, CreatedToMs: base.UnixMilli() + 5}, "15"},
		{"from and to", ListQuery{Limit: 100, CreatedFromMs: base.UnixMilli(), CreatedToMs: base.UnixMilli() + 9}, "6321"},
		{"after a position", ListQuery{Limit: 100, After: &Position{CreatedMs: base.UnixMilli() + 5, ID: all[2].ID}}, "215"},
		{"nothing", ListQuery{Limit: 100, Status: StatusCompleted, CreatedFromMs: base.UnixMilli() + 6}, ""},
	} {
		if page, _, _ := list(tc.q); page != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, page, tc.want)
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestClaimsPartitionMove runs the system as separate processes (an API,
// projectors with claim stores of their own, the broker, ClickHouse, Redis)
// and moves the events topic's partitions between projectors while copies of
// events arrive (docs/design/projector.md, Claims):
//   - a client's retry of an event arrives after the partition of its first
//     copy moved to a projector that never saw it: it is recognised (through
//     the claims changelog) and dropped;
//   - a projector is killed (kill -9) in the middle of a batch, its claims in
//     the changelog and its offsets not committed, while another projector
//     joins and retries of that batch's events arrive: the survivor folds the
//     batch's events once each (their replays recognised) and drops the
//     retries.
//
// Every copy carries what it is in its placement path, so that the row kept
// tells which copy was folded: a retry folded after its first copy would be
// the row that the tables' FINAL keeps.
func TestClaimsPartitionMove(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the system as separate processes")
	}
	s := newFaultStack(t)
	api := s.serve("api", "api")
	p1 := s.serve("projector-1", "projector")
	d := s.setUp(api, "Claims", api, p1)

	post := func(ids []string, path string) {
		t.Helper()
		var items []string
		for i, id := range ids {
			items = append(items, fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-%d","entity":{"type":"product","id":"P1"},"placement":{"path":%q}}`,
				id, ts(time.Now()), i, path))
		}
		for len(items) > 0 {
			n := min(50, len(items))
			body := `{"impressions":[` + strings.Join(items[:n], ",") + `]}`
			s.must(api, d.mkKey, "POST", "/v2/events", body, 200)
			items = items[n:]
		}
	}
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return out
	}
	// stored returns, per event id starting with prefix, the placement path
	// of the row `events` shows and how many rows it shows.
	stored := func(prefix string) (map[string]string, error) {
		rows, err := s.query("SELECT event_id, any(placement_path), toString(count()) FROM events WHERE startsWith(event_id, ?) GROUP BY event_id", prefix)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, r := range rows {
			if r[2] != "1" {
				return nil, fmt.Errorf("event %s shows %s rows", r[0], r[2])
			}
			out[r[0]] = r[1]
		}
		return out, nil
	}
	// waitFolded waits until every id is stored, and checks that each
	// shows the copy sent with path first.
	waitFolded := func(prefix string, want []string) {
		t.Helper()
		testenv.Eventually(t, catchUpBound, func() error {
			got, err := stored(prefix)
			if err != nil {
				return err
			}
			if len(got) != len(want) {
				return fmt.Errorf("%d of the %d events %s* stored", len(got), len(want), prefix)
			}
			return nil
		})
	}
	checkFirst := func(prefix string, want []string) {
		t.Helper()
		got, err := stored(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range want {
			if got[id] != "first" {
				t.Errorf("event %s: the row kept has placement path %q, want the first copy's (%q)", id, got[id], "first")
			}
		}
	}
	claimsEnd := func() int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(s.admin).ListEndOffsets(ctx, "endcap.claims.events")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}

	t.Run("retry after its partition moved", func(t *testing.T) {
		orig := ids("moved", 60)
		post(orig, "first")
		waitFolded("moved-", orig)
		// A second projector joins, then the first leaves: every partition
		// moves to the second, whose store has never seen them.
		p2 := s.serve("projector-2", "projector")
		s.waitReady(p2, 90*time.Second)
		time.Sleep(3 * time.Second)
		p1.signal(t, syscall.SIGTERM)
		post(orig, "retry")
		marks := ids("moved-mark", 30)
		post(marks, "first")
		waitFolded("moved-mark-", marks)
		checkFirst("moved-", orig)
		if n, _ := p2.metric("endcap_projector_duplicates_total"); n < float64(len(orig)) {
			t.Errorf("the second projector dropped %v duplicates, want at least %d", n, len(orig))
		}
		if n, _ := p2.metric("endcap_projector_claims_caught_up_records_total"); n < float64(len(orig)) {
			t.Errorf("the second projector read %v claims from the changelog, want at least the %d of the first", n, len(orig))
		}
		s.restart(p1)
		s.waitReady(p1, 90*time.Second)
		p2.signal(t, syscall.SIGTERM)
	})

	t.Run("kill -9 mid-batch during a move", func(t *testing.T) {
		// projector-1 owns every partition. ClickHouse freezes: its next
		// batch hangs in the sinks, its claims produced to the changelog
		// and its offsets not committed.
		resume := s.pause(s.pid(localstack.ServiceClickHouse))
		before := claimsEnd()
		batch := ids("killed", 50)
		post(batch, "first")
		// Its claims are in the changelog (of the events it polled before
		// the batch closed; the others wait in Kafka).
		testenv.Eventually(t, 30*time.Second, func() error {
			if n := claimsEnd() - before; n == 0 {
				return fmt.Errorf("none of the batch's %d claims in the changelog", len(batch))
			}
			return nil
		})
		t.Logf("%d claims of the stuck batch in the changelog", claimsEnd()-before)
		// A projector joins (the group rebalances once the batch ends), and
		// the one holding the batch dies meanwhile.
		p3 := s.serve("projector-3", "projector")
		time.Sleep(2 * time.Second)
		p1.signal(t, syscall.SIGKILL)
		post(batch, "retry")
		time.Sleep(2 * time.Second)
		resume()
		marks := ids("killed-mark", 30)
		post(marks, "first")
		waitFolded("killed-mark-", marks)
		waitFolded("killed-", append(append([]string(nil), batch...), marks...))
		checkFirst("killed-", batch)
		if n, _ := p3.metric("endcap_projector_duplicates_total"); n < float64(len(batch)) {
			t.Errorf("the surviving projector dropped %v duplicates, want at least %d", n, len(batch))
		}
	})
}

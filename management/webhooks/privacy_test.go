package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/storage/statelog"
)

// TestPrivacyDeletionEvent: a deletion request's record makes a
// privacy.deletion.completed event once it is completed (once: the event id
// is the record's), with the request as GET shows it, never its ids.
func TestPrivacyDeletionEvent(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	rec := func(version int64, d privacy.Deletion) []byte {
		st, _ := json.Marshal(d)
		b, _ := json.Marshal(statelog.Record{Type: privacy.TypeDeletion, ID: "mp1/" + d.ID, Version: version, AtMs: at.UnixMilli(), State: st})
		return b
	}
	d := privacy.Deletion{ID: "0195a000-0000-7000-8000-000000000001", Status: privacy.StatusPending, RequestedAt: at, OpaqueUserIDs: []string{"shopper-1"}, IDCount: 1}
	r := &Router{o: RouterOptions{Decoders: map[string]Decoder{privacy.TypeDeletion: DeletionDecoder}}}
	for _, st := range []privacy.Status{privacy.StatusPending, privacy.StatusRunning, privacy.StatusFailed} {
		d.Status = st
		if evs, err := r.entityEvents(context.Background(), rec(1, d)); err != nil || len(evs) != 0 {
			t.Fatalf("%s: %v %v", st, evs, err)
		}
	}
	d.Status, d.OpaqueUserIDs = privacy.StatusCompleted, nil
	d.Removed = &privacy.Removed{ClickHouse: map[string]int64{"events_raw": 3}, Redis: privacy.RedisRemoved{SegmentMemberships: 1}}
	evs, err := r.entityEvents(context.Background(), rec(4, d))
	if err != nil || len(evs) != 1 {
		t.Fatalf("completed: %v %v", evs, err)
	}
	ev := evs[0]
	if ev.Type != TypePrivacyDeletionDone || ev.MarketplaceID != "mp1" || ev.Subject != d.ID || !ev.Timestamp.Equal(at) {
		t.Errorf("event %+v", ev)
	}
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data["deletionId"] != d.ID || data["status"] != "completed" || data["removed"] == nil || strings.Contains(string(ev.Data), "shopper-1") {
		t.Errorf("data %s", ev.Data)
	}
	again, _ := r.entityEvents(context.Background(), rec(4, d))
	if len(again) != 1 || again[0].ID != ev.ID {
		t.Errorf("the same record read again makes another event: %v", again)
	}
}

package kafka_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/kafka"
)

// TestProgress: the end offsets of every partition of the folds' topics,
// and the groups' committed offsets, the start offset where a group has
// committed nothing (it starts there).
func TestProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, adm, _ := newTopic(t, ctx, "events", 3, 4)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "auctions"); err != nil {
		t.Fatal(err)
	}
	commit(t, ctx, adm, "fold", "events", map[int32]int64{0: 4, 1: 2})
	p := kafka.NewProgress(cl, kafka.Fold{Group: "fold", Topic: "events"}, kafka.Fold{Group: "auctions-fold", Topic: "auctions"})

	ends, err := p.Ends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(part int32) kafka.FoldPartition {
		return kafka.FoldPartition{Group: "fold", Topic: "events", Partition: part}
	}
	au := func(part int32) kafka.FoldPartition {
		return kafka.FoldPartition{Group: "auctions-fold", Topic: "auctions", Partition: part}
	}
	if want := (kafka.Offsets{ev(0): 4, ev(1): 4, ev(2): 4, au(0): 0, au(1): 0}); !maps.Equal(ends, want) {
		t.Errorf("ends %v, want %v", ends, want)
	}
	committed, err := p.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2: no commit, the start offset. The auctions group does
	// not exist: every partition at its start.
	if want := (kafka.Offsets{ev(0): 4, ev(1): 2, ev(2): 0, au(0): 0, au(1): 0}); !maps.Equal(committed, want) {
		t.Errorf("committed %v, want %v", committed, want)
	}

	if _, err := kafka.NewProgress(cl, kafka.Fold{Group: "g", Topic: "missing"}).Ends(ctx); err == nil {
		t.Error("Ends of a topic that does not exist: no error")
	}
}

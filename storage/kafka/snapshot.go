package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Snapshot is what a compacted topic holds up to the end offsets it had when
// it was read: the last record of each key (a key whose last record is a
// tombstone is left out), in partition and offset order.
type Snapshot struct {
	Topic      string
	Partitions int32
	// Ends are the end offsets (high watermarks) the read went up to.
	Ends    map[int32]int64
	Records []*kgo.Record
	// Read is how many records were read (every version of every key).
	Read int64
}

// ReadSnapshot reads topic from its start up to the end offsets of its
// partitions taken first, and keeps the last record of each key. ctx bounds
// the whole read: a broker that stops answering fails it. opts are the
// connection's options (Conn.With).
func ReadSnapshot(ctx context.Context, brokers []string, log *slog.Logger, topic string, opts ...kgo.Opt) (Snapshot, error) {
	snap := Snapshot{Topic: topic}
	admin, err := NewClient(brokers, log, opts...)
	if err != nil {
		return snap, err
	}
	ends, err := EndOffsets(ctx, admin, topic)
	admin.Close()
	if err != nil {
		return snap, fmt.Errorf("topic %s: end offsets: %w", topic, err)
	}
	snap.Ends, snap.Partitions = ends, int32(len(ends))
	from := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			from[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(from) == 0 {
		return snap, nil
	}
	cl, err := NewClient(brokers, log, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxBytes(64<<20))...)
	if err != nil {
		return snap, err
	}
	defer cl.Close()
	type at struct {
		partition int32
		offset    int64
	}
	last := map[string]*kgo.Record{}
	left := len(from)
	done := map[int32]bool{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return snap, fmt.Errorf("topic %s: read %d records, not all before the deadline: %w", topic, snap.Read, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err)) })
		if ferr != nil {
			return snap, fmt.Errorf("topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end := ends[r.Partition]
			if done[r.Partition] || r.Offset >= end {
				return
			}
			snap.Read++
			last[string(r.Key)] = r
			if r.Offset == end-1 {
				done[r.Partition] = true
				left--
			}
		})
		// A partition whose last records were compacted away or deleted
		// ends before its end offset: it is done once the fetch position
		// reached the end.
		for p, end := range ends {
			if _, asked := from[p]; !asked || done[p] {
				continue
			}
			if lso, ok := fetchedUpTo(fs, topic, p); ok && lso >= end {
				done[p] = true
				left--
			}
		}
	}
	keys := make([]at, 0, len(last))
	byAt := map[at]*kgo.Record{}
	for _, r := range last {
		if r.Value == nil {
			continue
		}
		a := at{r.Partition, r.Offset}
		keys = append(keys, a)
		byAt[a] = r
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].partition != keys[j].partition {
			return keys[i].partition < keys[j].partition
		}
		return keys[i].offset < keys[j].offset
	})
	snap.Records = make([]*kgo.Record, len(keys))
	for i, a := range keys {
		snap.Records[i] = byAt[a]
	}
	return snap, nil
}

// fetchedUpTo is the high watermark a fetch reported for a partition with
// no record past it (ok false when the fetch did not include it).
func fetchedUpTo(fs kgo.Fetches, topic string, p int32) (int64, bool) {
	var hw int64
	ok := false
	fs.EachPartition(func(f kgo.FetchTopicPartition) {
		if f.Topic != topic || f.Partition != p {
			return
		}
		if len(f.Records) == 0 {
			hw, ok = f.HighWatermark, true
			return
		}
		last := f.Records[len(f.Records)-1]
		hw, ok = last.Offset+1, true
	})
	return hw, ok
}

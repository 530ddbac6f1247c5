package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Fold is a topic and the consumer group that folds it.
type Fold struct {
	Group, Topic string
}

// FoldPartition is one partition of a fold's topic.
type FoldPartition struct {
	Group, Topic string
	Partition    int32
}

// Offsets are offsets per partition of some folds.
type Offsets map[FoldPartition]int64

// Progress reads how far consumer groups have folded their topics: the end
// offsets of the topics, and the offsets the groups committed.
type Progress struct {
	adm   *kadm.Client
	folds []Fold
}

// NewProgress reads the progress of folds through cl.
func NewProgress(cl *kgo.Client, folds ...Fold) *Progress {
	return &Progress{adm: kadm.NewClient(cl), folds: folds}
}

// Ends returns the end offset of every partition of the folds' topics: a
// record the broker acknowledged before the call has a lower offset.
func (p *Progress) Ends(ctx context.Context) (Offsets, error) {
	out := Offsets{}
	for _, f := range p.folds {
		ends, err := p.adm.ListEndOffsets(ctx, f.Topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: end offsets of %s: %w", f.Topic, err)
		}
		if err := eachListed(ends, func(o kadm.ListedOffset) { out[FoldPartition{f.Group, f.Topic, o.Partition}] = o.Offset }); err != nil {
			return nil, fmt.Errorf("kafka: end offsets of %s: %w", f.Topic, err)
		}
	}
	return out, nil
}

// Committed returns, for every partition of the folds' topics, the offset
// the fold's group committed there: every record below it is folded. Where
// the group has committed nothing, it is the partition's start offset (the
// groups start there).
func (p *Progress) Committed(ctx context.Context) (Offsets, error) {
	out := Offsets{}
	for _, f := range p.folds {
		starts, err := p.adm.ListStartOffsets(ctx, f.Topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: start offsets of %s: %w", f.Topic, err)
		}
		if err := eachListed(starts, func(o kadm.ListedOffset) { out[FoldPartition{f.Group, f.Topic, o.Partition}] = o.Offset }); err != nil {
			return nil, fmt.Errorf("kafka: start offsets of %s: %w", f.Topic, err)
		}
		committed, err := p.adm.FetchOffsets(ctx, f.Group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			continue // no commit yet
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: offsets of group %s: %w", f.Group, err)
		}
		committed.Each(func(o kadm.OffsetResponse) {
			k := FoldPartition{f.Group, f.Topic, o.Partition}
			if _, ok := out[k]; ok && o.Topic == f.Topic && o.Err == nil && o.At >= 0 {
				out[k] = o.At
			}
		})
	}
	return out, nil
}

func eachListed(offs kadm.ListedOffsets, fn func(kadm.ListedOffset)) error {
	var err error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			err = o.Err
			return
		}
		fn(o)
	})
	if err == nil && len(offs) == 0 {
		err = errors.New("no partitions (does the topic exist?)")
	}
	return err
}

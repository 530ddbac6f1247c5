package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNotAcknowledged means the wait for an acknowledgement ended (the
// caller's context) while records were still buffered or in flight: they
// may still land, all of them (they are never failed because the caller
// stopped waiting).
var ErrNotAcknowledged = errors.New("kafka: records not acknowledged yet; they may still be written")

// Pending is a set of records handed to the producer.
type Pending struct {
	done chan struct{}
	err  error // set before done is closed
}

// Produce hands recs to the producer with a context detached from ctx's
// cancellation: a caller that stops waiting never makes the client fail
// part of the records (franz-go fails the buffered records of a partition
// whose first record's context ends, while another partition's may already
// be in flight). The records are acknowledged or failed on the client's own
// terms (its retries and delivery timeout). Wait for them with Wait.
//
// Produce does not block. The records are produced as ProduceSync does
// (their partitions do not wait for the linger), from a goroutine that
// lives until they are acknowledged or failed.
func Produce(ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) *Pending {
	return produce(context.WithoutCancel(ctx), cl, recs)
}

// ProduceBound is Produce with the records bound to ctx, on franz-go's
// terms: when ctx ends, the records still buffered are failed with its
// error (those already in flight to a broker may land). For a caller that
// answers its client "not stored, retry" once ctx ends, and so must not
// leave records buffered behind it (ingest.Appender: the retry carries the
// same event ids, which the fold deduplicates).
func ProduceBound(ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) *Pending {
	return produce(ctx, cl, recs)
}

func produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) *Pending {
	p := &Pending{done: make(chan struct{})}
	if len(recs) == 0 {
		close(p.done)
		return p
	}
	go func() {
		p.err = cl.ProduceSync(ctx, recs...).FirstErr()
		close(p.done)
	}()
	return p
}

// Done is closed once every record is acknowledged or failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Err is the first record's failure, once Done is closed.
func (p *Pending) Err() error {
	<-p.done
	return p.err
}

// Wait returns nil once every record is acknowledged, the first failure
// when one failed, or an error wrapping ErrNotAcknowledged when ctx ends
// first (whatever the producer is doing: a request in flight to a broker
// that does not answer keeps the records unacknowledged for as long as the
// client's request timeout and retries allow, far past a request deadline).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.Err()
	case <-ctx.Done():
		select {
		case <-p.done: // both ready: the answer is known
			return p.Err()
		default:
		}
		return fmt.Errorf("%w: %w", ErrNotAcknowledged, context.Cause(ctx))
	}
}

package rollups

import (
	"context"
	"sync"
	"time"

	"github.com/endcap/endcap/storage/kafka"
)

// FoldProgress is how far the projectors have folded the topics the rollup
// is computed from (kafka.Progress): the topics' end offsets and the
// groups' committed offsets, per partition.
type FoldProgress interface {
	Ends(ctx context.Context) (kafka.Offsets, error)
	Committed(ctx context.Context) (kafka.Offsets, error)
}

// Watermark finds instants before which everything the folded topics
// acknowledged is in ClickHouse. A projector inserts a batch before it
// commits the batch's offsets, and the broker acknowledges a record only
// once it is below the partition's end offset. So if the end offsets were
// read at t (the call starting at t), and later every group has committed
// at least those offsets, every record acknowledged before t has been
// inserted: t is a watermark from then on, for whatever reads the tables
// afterwards. The instants are the clock of this process.
type Watermark struct {
	src  FoldProgress
	poll time.Duration
	now  func() time.Time

	mu        sync.Mutex
	confirmed time.Time // the latest instant known to be folded
	pending   []sample  // read ends not known to be folded yet, oldest first
}

type sample struct {
	at   time.Time
	ends kafka.Offsets
}

// maxPending bounds the unconfirmed samples kept; the oldest go first
// (a later sample's confirmation covers them).
const maxPending = 64

// NewWatermark returns a Watermark over src that polls the committed
// offsets every poll while it waits (200 ms when poll ≤ 0).
func NewWatermark(src FoldProgress, poll time.Duration) *Watermark {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	return &Watermark{src: src, poll: poll, now: time.Now}
}

// Wait returns a watermark as late as it can: it reads the end offsets at
// the call (instant t) and polls the groups' commits until they reach them,
// then returns t and caughtUp true. When they do not within wait, it
// returns the latest earlier instant found folded, by this call or an
// earlier one (zero when none is known), and caughtUp false. err is set
// when the offsets could not be read (the result is then what was known).
func (w *Watermark) Wait(ctx context.Context, wait time.Duration) (at time.Time, caughtUp bool, err error) {
	t := w.now()
	ends, err := w.src.Ends(ctx)
	if err != nil {
		return w.Known(), false, err
	}
	w.mu.Lock()
	w.pending = append(w.pending, sample{at: t, ends: ends})
	if len(w.pending) > maxPending {
		w.pending = w.pending[len(w.pending)-maxPending:]
	}
	w.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		committed, err := w.src.Committed(ctx)
		if err != nil {
			return w.Known(), false, err
		}
		if known := w.confirm(committed); !known.Before(t) {
			return t, true, nil
		}
		select {
		case <-ctx.Done():
			return w.Known(), false, ctx.Err()
		case <-deadline.C:
			return w.Known(), false, nil
		case <-tick.C:
		}
	}
}

// Known is the latest instant known to be folded (zero when none is).
func (w *Watermark) Known() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.confirmed
}

// confirm moves the watermark to the latest pending sample whose end
// offsets committed has reached, and returns it.
func (w *Watermark) confirm(committed kafka.Offsets) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.pending) - 1; i >= 0; i-- {
		if !folded(w.pending[i].ends, committed) {
			continue
		}
		if at := w.pending[i].at; at.After(w.confirmed) {
			w.confirmed = at
		}
		w.pending = append(w.pending[:0], w.pending[i+1:]...)
		break
	}
	return w.confirmed
}

// folded says whether committed has reached ends on every partition.
func folded(ends, committed kafka.Offsets) bool {
	for p, end := range ends {
		if c, ok := committed[p]; (!ok && end > 0) || c < end {
			return false
		}
	}
	return true
}

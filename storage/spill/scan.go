package spill

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// ErrStopped is what Scan returns when its stop function asked it to.
var ErrStopped = errors.New("spill: the scan was stopped")

// Scan calls fn with every key that begins with prefix and its value, in
// key order, until fn returns false; key and value are valid during the
// call only. stop is asked every 4,096 keys (a deadline): when it returns
// true the scan ends with ErrStopped. The scan reads one consistent
// snapshot of the store.
func (s *Store) Scan(prefix []byte, stop func() bool, fn func(key, value []byte) bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%4096 == 0 && stop != nil && stop() {
			_ = it.Close()
			return ErrStopped
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	return it.Close()
}

// prefixEnd is the first key after every key that begins with prefix (nil:
// none, the prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

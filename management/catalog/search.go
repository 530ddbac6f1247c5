package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/storage/spill"
)

// The console's product search without a vendor: the products of a
// marketplace whose id or name contains a text, case-insensitively. No
// index: the view holds every id (and the short names) in memory and the
// texts store holds the other names on local disk in key order, so one
// pass over each (a scan of the disk store's marketplace range rather than
// a read per product) finds them, within the caller's deadline. It costs
// time in proportion to the catalog (BenchmarkSearchAll; docs/guide/console.md
// gives the figures): an index of the names' trigrams would answer a
// million products sooner, at a cost in memory per product in every
// process, which the catalog keeps small (docs/operations/operations.md, Memory).

// errSearchTimeout: the search ran out of its deadline.
var errSearchTimeout = errkind.New(errkind.Unavailable, "the search of the whole catalog took too long: give a vendor to search its products only")

// searchAll returns the first limit products of mp, in id order, whose id
// or name contains q (case-insensitive), and whether more match. ctx
// bounds the scan.
func (s *Service) searchAll(ctx context.Context, mp, q string, limit int) ([]ProductView, bool, error) {
	lower := strings.ToLower(q)
	// The product whose id is q comes first.
	var head []ProductView
	exact, _, ok, err := s.full(mp, q)
	if err != nil {
		return nil, false, err
	}
	if ok {
		head = append(head, exact.view(q))
	}
	rest := limit - len(head)
	first := smallest{max: rest + 1, skip: q}
	n := 0
	stopped := false
	// The view: every id, and the names kept in memory.
	s.products.Each(mp, func(id string, p Product) bool {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			stopped = true
			return false
		}
		if containsFold(id, lower) || (!p.spilled && containsFold(p.Name, lower)) {
			first.add(id)
		}
		return true
	})
	if stopped {
		return nil, false, errSearchTimeout
	}
	// The names on disk, in id order.
	if s.texts != nil {
		prefix := textKey(nil, mp, "")
		err := s.texts.Scan(prefix, func() bool { return ctx.Err() != nil }, func(key, text []byte) bool {
			if name, ok := textName(text); ok && bytesContainsFold(name, lower) {
				first.addBytes(key[len(prefix):])
			}
			return true
		})
		switch {
		case err == spill.ErrStopped:
			return nil, false, errSearchTimeout
		case err != nil:
			return nil, false, errTexts
		}
	}
	// Each found product as it is now (a text on disk may be of a version
	// replaced since the scan).
	var out []ProductView
	for _, id := range first.ids {
		p, _, ok, err := s.full(mp, id)
		if err != nil {
			return nil, false, err
		}
		if ok && (containsFold(id, lower) || containsFold(p.Name, lower)) {
			out = append(out, p.view(id))
		}
	}
	more := len(out) > rest
	if more {
		out = out[:rest]
	}
	return append(head, out...), more, nil
}

// textName is the name in a product's text on disk (appendText's form).
func textName(text []byte) ([]byte, bool) {
	_, k := binary.Uvarint(text)
	if k <= 0 {
		return nil, false
	}
	text = text[k:]
	n, k := binary.Uvarint(text)
	if k <= 0 || uint64(len(text)-k) < n {
		return nil, false
	}
	return text[k : k+int(n)], true
}

// bytesContainsFold is containsFold of a byte slice.
func bytesContainsFold(b []byte, lower string) bool {
	if len(lower) > len(b) {
		return false
	}
	for _, c := range b {
		if c >= 0x80 {
			return bytes.Contains(bytes.ToLower(b), []byte(lower))
		}
	}
	for i := 0; i+len(lower) <= len(b); i++ {
		j := 0
		for ; j < len(lower); j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}

// smallest keeps the max smallest distinct ids added, sorted, but skip.
type smallest struct {
	max  int
	skip string
	ids  []string
}

func (s *smallest) add(id string) {
	if len(s.ids) == s.max && id >= s.ids[len(s.ids)-1] || id == s.skip {
		return
	}
	s.insert(id)
}

// addBytes is add of an id as bytes, copied only when it is kept.
func (s *smallest) addBytes(id []byte) {
	if len(s.ids) == s.max && string(id) >= s.ids[len(s.ids)-1] || string(id) == s.skip {
		return
	}
	s.insert(string(id))
}

func (s *smallest) insert(id string) {
	if s.max == 0 {
		return
	}
	i, found := slices.BinarySearch(s.ids, id)
	if found {
		return
	}
	s.ids = slices.Insert(s.ids, i, id)
	if len(s.ids) > s.max {
		s.ids = s.ids[:s.max]
	}
}

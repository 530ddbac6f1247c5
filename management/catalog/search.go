package catalog

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/endcap/endcap/internal/errkind"
)

// The console's product search without a vendor: the products of a
// marketplace whose id or name contains a text, case-insensitively, read
// from the names index (nameIndex: every id and name in lower case, in a
// file on local disk searched in blocks), within the caller's deadline.

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
	err = s.names.search(mp, lower, func() bool { return ctx.Err() != nil }, first.beyond, first.addBytes)
	switch {
	case errors.Is(err, errStopped):
		return nil, false, errSearchTimeout
	case err != nil:
		slog.Error("catalog: the products' names could not be searched", "err", err)
		return nil, false, errTexts
	}
	// Each found product as it is now (it may have changed since the
	// search).
	var out []ProductView
	for _, id := range first.ids {
		p, _, ok, err := s.full(mp, id)
		if err != nil {
			return nil, false, err
		}
		if ok && (containsFold(id, lower) || containsFold(p.Name(), lower)) {
			out = append(out, p.view(id))
		}
	}
	more := len(out) > rest
	if more {
		out = out[:rest]
	}
	return append(head, out...), more, nil
}

// smallest keeps the max smallest distinct ids added, sorted, but skip.
type smallest struct {
	max  int
	skip string
	ids  []string
}

// beyond says whether no id from min on would be kept: the set is full and
// min is not below its largest.
func (s *smallest) beyond(min string) bool {
	return len(s.ids) > 0 && len(s.ids) == s.max && min >= s.ids[len(s.ids)-1]
}

// addBytes adds an id, copied only when it is kept.
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

package projections

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/endcap/endcap/internal/records"
)

// SortedOrder returns the positions 0..n-1 ordered by compare, ties kept in
// the order given: the order in which ClickHouse's MergeTree would store
// the rows of an inserted block when compare is its sorting key (a stable
// sort). A block sent in that order is written as it comes: the server
// checks that it is sorted and then skips its sort and the permutation of
// every column (MergeTreeDataWriterBlocksAlreadySorted in system.events),
// which costs it more than the sort costs the fold. An order that differs
// from the server's in some case (a key of other types) only costs the
// server its sort, never a wrong row.
func SortedOrder(n int, compare func(a, b int) int) []int32 {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := compare(int(a), int(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// CompareUUID orders UUIDs as ClickHouse orders a UUID column: by their 16
// bytes as text writes them (the high 64 bits, then the low ones).
func CompareUUID(a, b [16]byte) int {
	if a == b { // a batch's rows are mostly of one marketplace
		return 0
	}
	return bytes.Compare(a[:], b[:])
}

// compareEventKey orders events by the sorting key of interactions_raw
// and events_raw, (marketplace_id, kind, event_id): records.Kind has the
// values of the tables' kind Enum8.
func compareEventKey(a, b *Event) int {
	if c := CompareUUID(a.MP, b.MP); c != 0 {
		return c
	}
	if a.E.Kind != b.E.Kind {
		return cmp.Compare(a.E.Kind, b.E.Kind)
	}
	return strings.Compare(a.E.ID, b.E.ID)
}

// eventOrder is SortedOrder of evs by compareEventKey, each event's key
// copied next to the others first: the sort then reads the events
// themselves (hundreds of bytes each, spread over the batch) only for the
// ids' bytes. The prefix every id of the batch shares (a client's ids often
// begin alike) is left out of the comparisons, and the first 8 bytes after
// it are compared as one number before the rest.
func eventOrder(evs []*Event) []int32 {
	type key struct {
		id   string // the id less the batch's common prefix
		pre  uint64 // its first 8 bytes, big-endian, zero-padded
		mp   [16]byte
		i    int32
		kind records.Kind
	}
	common := 0
	if len(evs) > 0 {
		first := evs[0].E.ID
		common = len(first)
		for _, e := range evs[1:] {
			id := e.E.ID
			n := min(common, len(id))
			k := 0
			for k < n && id[k] == first[k] {
				k++
			}
			if common = k; common == 0 {
				break
			}
		}
	}
	keys := make([]key, len(evs))
	for i, e := range evs {
		id := e.E.ID[common:]
		var pre [8]byte
		copy(pre[:], id)
		keys[i] = key{id: id, pre: binary.BigEndian.Uint64(pre[:]), mp: e.MP, i: int32(i), kind: e.E.Kind}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.mp != b.mp {
			return bytes.Compare(a.mp[:], b.mp[:])
		}
		if a.kind != b.kind {
			return cmp.Compare(a.kind, b.kind)
		}
		if a.pre != b.pre {
			return cmp.Compare(a.pre, b.pre)
		}
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int32, len(evs))
	for k := range keys {
		order[k] = keys[k].i
	}
	return order
}

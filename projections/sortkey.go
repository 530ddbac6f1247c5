package projections

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
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

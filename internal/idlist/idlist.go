// Package idlist packs a short list of ids into one string.
//
// The catalog keeps millions of products in every process's memory, each
// with a list of vendors and a list of categories. As []string, a product's
// lists are one more heap object and a pointer per id for the garbage
// collector to follow on every cycle. A List is the same ids inside the
// product's one allocation of texts: reading it allocates nothing, and the
// collector sees a string (docs/reference/catalog.md, Storage and memory).
//
// The form: the number of ids n, the end of each id's bytes counted from
// the end of this header, then the ids' bytes one after the other. A short
// list (at most 254 ids and 255 bytes of ids: nearly every product's) takes
// one byte for n and one for each end; any other starts with the byte 0xFF,
// then n and each end in 4 bytes, little-endian. The empty list is the
// empty string. The form depends on the ids only, so two lists of the same
// ids in the same order are equal strings.
package idlist

import (
	"encoding/binary"
	"iter"
)

// List is a packed list of ids (see the package comment). The zero value is
// the empty list.
type List string

// wide is the first byte of a list in the long form.
const wide = 0xFF

// short reports whether n ids of total bytes take the short form.
func short(n, total int) bool { return n < wide && total <= 0xFF }

// HeaderSize is the length of the header of n ids of total bytes (0 for
// none).
func HeaderSize(n, total int) int {
	switch {
	case n == 0:
		return 0
	case short(n, total):
		return 1 + n
	}
	return 1 + 4 + 4*n
}

// Size is the length of the packed form of items.
func Size(items []string) int {
	total := 0
	for _, s := range items {
		total += len(s)
	}
	return HeaderSize(len(items), total) + total
}

// AppendHeader appends the header of the ids whose bytes end at ends,
// counted from from (ends[i] - from is where id i ends): the caller then
// appends the ids' bytes.
func AppendHeader(b []byte, from int, ends []int) []byte {
	n := len(ends)
	if n == 0 {
		return b
	}
	if short(n, ends[n-1]-from) {
		b = append(b, byte(n))
		for _, e := range ends {
			b = append(b, byte(e-from))
		}
		return b
	}
	b = append(b, wide)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, e := range ends {
		b = binary.LittleEndian.AppendUint32(b, uint32(e-from))
	}
	return b
}

// Append appends the packed form of items to b.
func Append(b []byte, items []string) []byte {
	if len(items) == 0 {
		return b
	}
	var buf [16]int
	ends := buf[:0]
	end := 0
	for _, s := range items {
		end += len(s)
		ends = append(ends, end)
	}
	b = AppendHeader(b, 0, ends)
	for _, s := range items {
		b = append(b, s...)
	}
	return b
}

// Of packs items into a new List.
func Of(items ...string) List { return List(Append(make([]byte, 0, Size(items)), items)) }

// Len is the number of ids.
func (l List) Len() int {
	switch {
	case len(l) == 0:
		return 0
	case l[0] != wide:
		return int(l[0])
	}
	return int(u32(string(l), 1))
}

func u32(s string, at int) uint32 {
	_ = s[at+3]
	return uint32(s[at]) | uint32(s[at+1])<<8 | uint32(s[at+2])<<16 | uint32(s[at+3])<<24
}

// layout returns the number of ids, the offset of the ends and their
// width, and the offset of the ids' bytes.
func (l List) layout() (n, endsAt, width, data int) {
	switch {
	case len(l) == 0:
		return 0, 0, 1, 0
	case l[0] != wide:
		n = int(l[0])
		return n, 1, 1, 1 + n
	}
	n = int(u32(string(l), 1))
	return n, 5, 4, 5 + 4*n
}

// end is where id i ends, counted from data.
func (l List) end(endsAt, width, i int) int {
	if width == 1 {
		return int(l[endsAt+i])
	}
	return int(u32(string(l), endsAt+4*i))
}

// At is the id at index i (0 ≤ i < Len). It shares the list's bytes.
func (l List) At(i int) string {
	n, endsAt, width, data := l.layout()
	if i < 0 || i >= n {
		panic("idlist: index out of range")
	}
	start := 0
	if i > 0 {
		start = l.end(endsAt, width, i-1)
	}
	return string(l[data+start : data+l.end(endsAt, width, i)])
}

// All yields the ids in order.
func (l List) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		n, endsAt, width, data := l.layout()
		start := 0
		for i := range n {
			end := l.end(endsAt, width, i)
			if !yield(string(l[data+start : data+end])) {
				return
			}
			start = end
		}
	}
}

// Contains reports whether id is in the list.
func (l List) Contains(id string) bool {
	for s := range l.All() {
		if s == id {
			return true
		}
	}
	return false
}

// Strings returns the ids as a new slice (nil when empty). The strings share
// the list's bytes.
func (l List) Strings() []string {
	n := l.Len()
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for s := range l.All() {
		out = append(out, s)
	}
	return out
}

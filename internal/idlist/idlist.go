// Package idlist packs a short list of ids into one string.
//
// The catalog keeps a million products in every process's memory, each with
// a list of vendors and a list of categories. As []string, a product's lists
// are one more heap object and a pointer per id for the garbage collector to
// follow on every cycle. A List is the same ids inside the product's one
// allocation of texts: reading it allocates nothing, and the collector sees
// a string (docs/reference/catalog.md, Storage and memory).
//
// The form: the number of ids n (4 bytes, little-endian), the end of each
// id's bytes counted from the end of this header (4 bytes each), then the
// ids' bytes one after the other. The empty list is the empty string, so two
// lists of the same ids in the same order are equal strings.
package idlist

import (
	"encoding/binary"
	"iter"
)

// List is a packed list of ids (see the package comment). The zero value is
// the empty list.
type List string

// Size is the length of the packed form of items.
func Size(items []string) int {
	if len(items) == 0 {
		return 0
	}
	n := 4 + 4*len(items)
	for _, s := range items {
		n += len(s)
	}
	return n
}

// Append appends the packed form of items to b.
func Append(b []byte, items []string) []byte {
	if len(items) == 0 {
		return b
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(items)))
	end := 0
	for _, s := range items {
		end += len(s)
		b = binary.LittleEndian.AppendUint32(b, uint32(end))
	}
	for _, s := range items {
		b = append(b, s...)
	}
	return b
}

// Of packs items into a new List.
func Of(items ...string) List { return List(Append(make([]byte, 0, Size(items)), items)) }

// Len is the number of ids.
func (l List) Len() int {
	if len(l) < 4 {
		return 0
	}
	return int(u32(string(l), 0))
}

func u32(s string, at int) uint32 {
	_ = s[at+3]
	return uint32(s[at]) | uint32(s[at+1])<<8 | uint32(s[at+2])<<16 | uint32(s[at+3])<<24
}

// At is the id at index i (0 ≤ i < Len). It shares the list's bytes.
func (l List) At(i int) string {
	n := l.Len()
	if i < 0 || i >= n {
		panic("idlist: index out of range")
	}
	data := 4 + 4*n
	start := 0
	if i > 0 {
		start = int(u32(string(l), 4*i))
	}
	end := int(u32(string(l), 4+4*i))
	return string(l[data+start : data+end])
}

// All yields the ids in order.
func (l List) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		n := l.Len()
		data := 4 + 4*n
		start := 0
		for i := range n {
			end := int(u32(string(l), 4+4*i))
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

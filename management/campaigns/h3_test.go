package campaigns

import (
	"strconv"
	"testing"
)

// h3Cell builds a cell index from its parts (digits beyond res are 7).
func h3Cell(res int, baseCell uint64, digits ...uint64) uint64 {
	h := uint64(1)<<59 | uint64(res)<<52 | baseCell<<45
	for r := 1; r <= 15; r++ {
		d := uint64(7)
		if r <= len(digits) {
			d = digits[r-1]
		}
		h |= d << (uint(15-r) * 3)
	}
	return h
}

func TestParseH3Cell(t *testing.T) {
	valid := map[string]string{
		"85283473fffffff":   "85283473fffffff", // San Francisco, res 5
		"85283473FFFFFFF":   "85283473fffffff",
		"0x85283473fffffff": "85283473fffffff",
		" 8075fffffffffff ": "8075fffffffffff", // res 0
		"831c02fffffffff":   "831c02fffffffff", // res 3 hexagon next to a pentagon
		"831c00fffffffff":   "831c00fffffffff", // res 3 pentagon (base cell 14)
		"851c0047fffffff":   "851c0047fffffff",
		"8f283080dcb019d":   "8f283080dcb019d", // res 15
	}
	for in, want := range valid {
		got, ok := parseH3Cell(in)
		if !ok || got != want {
			t.Errorf("%q: got %q ok=%v, want %q", in, got, ok, want)
		}
	}
	invalid := []string{
		"", "0", "x", "zzzzzzzzzzzzzzz", "85283473fffffff0", "185283473fffffff",
		"115283473fffffff",                             // mode 2 (directed edge)
		"95283473fffffff",                              // reserved bit set
		"8528347ffffffff",                              // digit 5 is 7 at res 5
		"85283473ffffffe",                              // unused digit not 7
		strconv.FormatUint(h3Cell(0, 122), 16),         // base cell out of range
		strconv.FormatUint(h3Cell(1, 14, 1), 16),       // pentagon, first non-zero digit 1
		strconv.FormatUint(h3Cell(3, 14, 0, 0, 1), 16), // same, deeper
		"-85283473fffffff",
	}
	for _, in := range invalid {
		if got, ok := parseH3Cell(in); ok {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
	// The constructed ones are valid without the deleted subsequence.
	for _, h := range []uint64{h3Cell(1, 14, 2), h3Cell(3, 14, 0, 0, 2), h3Cell(1, 13, 1), h3Cell(15, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1)} {
		if !isValidH3Cell(h) {
			t.Errorf("%x rejected", h)
		}
	}
}

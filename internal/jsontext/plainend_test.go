package jsontext

import (
	"math/rand/v2"
	"testing"
)

// TestPlainEnd: PlainEnd stops at the first byte that stops a plain run,
// wherever it lies in its word, whatever comes after it (bytes that only
// the word's arithmetic could mistake for one), as the byte-by-byte scan.
func TestPlainEnd(t *testing.T) {
	slow := func(b []byte, i int) int {
		for i < len(b) && !stringStop[b[i]] {
			i++
		}
		return i
	}
	// Bytes around the stopping ones: a borrow from a stop makes the next
	// byte look like one (0x20 after a control character, '#' after '"',
	// ']' after '\\').
	alphabet := []byte{'a', ' ', '!', '"', '#', '\\', ']', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xc3, 0xff, '0'}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := make([]byte, r.IntN(40))
		for j := range b {
			if r.IntN(4) == 0 {
				b[j] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[j] = 'a' + byte(r.IntN(26))
			}
		}
		for i := 0; i <= len(b); i++ {
			if got, want := PlainEnd(b, i), slow(b, i); got != want {
				t.Fatalf("PlainEnd(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	}
}

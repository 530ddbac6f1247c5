package pagination

import (
	"strings"
	"testing"
)

func TestCursors(t *testing.T) {
	s := NewSigner([]byte("a test key of at least 16 bytes"))
	c := Cursor{List: "vendors", Marketplace: "mp-a", Scope: "global_id=g", After: "v-10"}
	tok := s.Encode(c)
	if got, err := s.Decode(tok, "vendors", "mp-a", "global_id=g"); err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, try := range map[string]func() error{
		"other list":        func() error { _, err := s.Decode(tok, "webhooks", "mp-a", "global_id=g"); return err },
		"other marketplace": func() error { _, err := s.Decode(tok, "vendors", "mp-b", "global_id=g"); return err },
		"other scope":       func() error { _, err := s.Decode(tok, "vendors", "mp-a", ""); return err },
		"altered": func() error {
			b := []byte(tok)
			b[len(b)-2] ^= 0x01
			_, err := s.Decode(string(b), "vendors", "mp-a", "global_id=g")
			return err
		},
		"other key": func() error {
			_, err := NewSigner([]byte("another key, also 16+ bytes")).Decode(tok, "vendors", "mp-a", "global_id=g")
			return err
		},
		"garbage":   func() error { _, err := s.Decode("not a cursor!", "vendors", "mp-a", ""); return err },
		"empty":     func() error { _, err := s.Decode("", "vendors", "mp-a", ""); return err },
		"too long":  func() error { _, err := s.Decode(strings.Repeat("A", 4096), "vendors", "mp-a", ""); return err },
		"truncated": func() error { _, err := s.Decode(tok[:10], "vendors", "mp-a", "global_id=g"); return err },
	} {
		if err := try(); err != ErrInvalid {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A key change invalidates cursors issued before it.
	s.SetKey([]byte("rotated key of at least 16 bytes"))
	if _, err := s.Decode(tok, "vendors", "mp-a", "global_id=g"); err != ErrInvalid {
		t.Errorf("after SetKey: %v", err)
	}
}

package records

import (
	"testing"

	gojson "github.com/goccy/go-json"
)

// BenchmarkDecodeEvent: DecodeEvent and goccy/go-json (the general decoder)
// on the record of a sponsored impression (testEvents[0]) and of a purchase
// of two items (testEvents[4]).
func BenchmarkDecodeEvent(b *testing.B) {
	for _, c := range []struct {
		name string
		e    *Event
	}{{"impression", &testEvents[0]}, {"purchase", &testEvents[4]}} {
		rec, err := EncodeEvent(c.e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			var e Event
			for b.Loop() {
				if err := DecodeEvent(rec, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("goccy-"+c.name, func(b *testing.B) {
			for b.Loop() {
				var e Event
				if err := gojson.Unmarshal(rec, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package statelog_test

import (
	"fmt"
	"testing"

	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkPut: one write expecting a version (a create), on kfake, from
// the request to this view having applied it.
func BenchmarkPut(b *testing.B) {
	_, brokers := testenv.Kafka(b)
	_, c := view(b, brokers)
	ctx := b.Context()
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.Put(ctx, "mp", fmt.Sprintf("id-%d", i), 0, thing{Name: "x", N: i}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutMany500: a last-writer-wins batch of 500 (a catalog upload).
func BenchmarkPutMany500(b *testing.B) {
	_, brokers := testenv.Kafka(b)
	_, c := view(b, brokers)
	ctx := b.Context()
	ws := make([]statelog.Write[thing], 500)
	b.ResetTimer()
	for i := range b.N {
		for j := range ws {
			ws[j] = statelog.Write[thing]{ID: fmt.Sprintf("id-%d", j), Expected: statelog.AnyVersion, Value: thing{Name: "x", N: i}}
		}
		if err := c.PutMany(ctx, "mp", ws); err != nil {
			b.Fatal(err)
		}
	}
}

package redisstore_test

import (
	"testing"

	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/storage/redisstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestServer reads the test stack's Redis: the version Endcap needs, and no
// eviction.
func TestServer(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	defer rdb.Close()
	s, err := redisstore.Server(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Supported(); err != nil || s.Evicts() {
		t.Errorf("test Redis %+v: supported %v, evicts %v", s, err, s.Evicts())
	}
}

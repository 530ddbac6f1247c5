package vendorid

import (
	"strconv"
	"strings"
	"testing"
)

// The ids are pinned: they were computed by another implementation of RFC
// 9562's UUIDv5 (Python's uuid.uuid5 of the namespace and the UTF-8 name).
// A change of the derivation would change every vendor's id, which this
// test forbids.
func TestUUIDPinned(t *testing.T) {
	const mp, mp2 = "1e5106f1-7c4e-4c55-9a43-3b8f0d6f2a10", "0b7c1a52-9d4e-4f3a-8c21-6e5d4c3b2a19"
	for _, tc := range []struct{ mp, id, want string }{
		{mp, "v-1", "c3f99701-929c-5663-a8c9-f7e5232da87f"},
		{mp, "v-2", "fcda2f4b-c94e-5732-9000-7cd074a93792"},
		{mp2, "v-1", "c28e58a5-2618-5368-81f5-b82f012e7051"}, // another marketplace, another vendor
		{mp, "Café/ü 1", "ac97348f-a3ac-54f0-8573-7b3b4e3f4481"},
	} {
		u := UUID(tc.mp, tc.id)
		if u.String() != tc.want || String(tc.mp, tc.id) != tc.want {
			t.Errorf("UUID(%s, %q) = %s, want %s", tc.mp, tc.id, u, tc.want)
		}
		if u.Version() != 5 || u.Variant().String() != "RFC4122" {
			t.Errorf("%s: version %d variant %s", u, u.Version(), u.Variant())
		}
	}
}

func TestParse(t *testing.T) {
	const id = "c3f99701-929c-5663-a8c9-f7e5232da87f"
	for _, s := range []string{id, strings.ToUpper(id)} {
		if u, ok := Parse(s); !ok || u.String() != id {
			t.Errorf("Parse(%s) = %s %v", s, u, ok)
		}
	}
	for _, s := range []string{"", "v-1", "c3f99701929c5663a8c9f7e5232da87f", "{" + id + "}", "urn:uuid:" + id,
		"c3f99701-929c-5663-a8c9-f7e5232da87g", id + " "} {
		if _, ok := Parse(s); ok {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestCache(t *testing.T) {
	const mp = "1e5106f1-7c4e-4c55-9a43-3b8f0d6f2a10"
	c := NewCache(mp)
	if c.String("") != "" {
		t.Error("no vendor has a UUID")
	}
	for i := range maxCache + 10 { // past the bound: starts again, same answers
		id := "v-" + strconv.Itoa(i%(maxCache+5))
		if got := c.String(id); got != String(mp, id) {
			t.Fatalf("%s: %s", id, got)
		}
	}
	if len(c.m) > maxCache {
		t.Errorf("cache holds %d", len(c.m))
	}
}

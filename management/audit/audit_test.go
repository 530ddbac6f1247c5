package audit

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestChange(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if _, ok := Change(context.Background(), "mp", "key.create", "k", "d", now); ok {
		t.Fatal("a change without an actor is recorded")
	}
	ctx := WithActor(context.Background(), Actor{Kind: "user", ID: "u1", Name: "a@b.test"})
	c, ok := Change(ctx, "mp", "key.create", "k1", strings.Repeat("é", 600), now)
	if !ok || c.Type != Type || !strings.HasPrefix(c.ID, "mp/") || c.Expected != 0 {
		t.Fatalf("change %+v", c)
	}
	e := c.State.(Entry)
	if e.Actor.String() != "a@b.test" || e.Action != "key.create" || e.Target != "k1" || e.MarketplaceID != "mp" || !e.At.Equal(now) {
		t.Fatalf("entry %+v", e)
	}
	if n := utf8.RuneCountInString(e.Detail); n != maxDetail+1 || !strings.HasSuffix(e.Detail, "…") {
		t.Fatalf("detail of %d characters", n)
	}
	// Ids sort by time (pages are newest first by id), and two of one instant differ.
	a, b, c2 := newID(now), newID(now.Add(time.Microsecond)), newID(now)
	if !(a < b) || a == c2 {
		t.Fatalf("ids %s, %s, %s", a, b, c2)
	}
	if (Actor{Kind: "cli"}).String() != "cli" || (Actor{}).String() != "unknown" {
		t.Fatal("actor names")
	}
}

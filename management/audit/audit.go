// Package audit keeps the audit log of a marketplace's key, user and
// settings changes. Each entry is one entity ("audit") on the accounts log
// (storage/statelog), written in the same batch as the change it records, so
// a change is stored with its entry or not at all. Entries never change.
//
// Who made a change travels in the write's context (WithActor): the console
// sets the signed-in user, the CLI sets "cli"; a change made without an
// actor is not audited (the demo's own set-up, tests).
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/storage/statelog"
)

// Type is the entity type of entries on the accounts log.
const Type = "audit"

// Actor is who made a change.
type Actor struct {
	// Kind: "user" (a console user), "cli" (endcap admin), "system".
	Kind string `json:"kind"`
	// ID and Name of the user (empty for the CLI).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// String is the actor as the console shows it.
func (a Actor) String() string {
	switch {
	case a.Name != "":
		return a.Name
	case a.Kind != "":
		return a.Kind
	}
	return "unknown"
}

// Entry is one audited change.
type Entry struct {
	ID            string    `json:"id"`
	MarketplaceID string    `json:"marketplaceId"`
	At            time.Time `json:"at"`
	Actor         Actor     `json:"actor"`
	// Action names the change: key.create, key.revoke, user.create,
	// user.disable, user.password, invitation.accept, settings.reserve…
	Action string `json:"action"`
	// Target is the id of what changed (a key, a user, the marketplace).
	Target string `json:"target"`
	// Detail says what changed, for people (never a secret).
	Detail string `json:"detail,omitempty"`
}

type actorKey struct{}

// WithActor returns ctx carrying the actor of the changes made with it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor ctx carries.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// maxDetail bounds an entry's detail (characters).
const maxDetail = 500

// Change returns the log change that records action on target in
// marketplace mp, by the actor of ctx; ok is false when ctx has no actor
// (nothing to record). Append it to the batch of the change it records.
func Change(ctx context.Context, mp, action, target, detail string, now time.Time) (statelog.Change, bool) {
	a, ok := ActorOf(ctx)
	if !ok {
		return statelog.Change{}, false
	}
	if utf8.RuneCountInString(detail) > maxDetail {
		r := []rune(detail)
		detail = string(r[:maxDetail]) + "…"
	}
	e := Entry{ID: newID(now), MarketplaceID: mp, At: now.UTC(), Actor: a, Action: action, Target: target, Detail: detail}
	return statelog.Change{Type: Type, ID: mp + "/" + e.ID, Expected: 0, State: e}, true
}

// newID is a time-ordered id: the time in microseconds (zero-padded, so
// that ids sort by time) and 8 random bytes.
func newID(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	us := strconv.FormatInt(now.UnixMicro(), 10)
	for len(us) < 17 {
		us = "0" + us
	}
	return us + "-" + hex.EncodeToString(b[:])
}

// Log is the view of the audit entries.
type Log struct {
	items *statelog.Collection[Entry]
}

// New registers the audit entries on log (the accounts log), before it runs.
func New(log *statelog.Log) *Log {
	return &Log{items: statelog.NewCollection[Entry](log, Type)}
}

// Page returns up to limit entries of a marketplace, newest first, before
// the entry id before ("" for the first page), and whether more follow.
func (l *Log) Page(mp, before string, limit int) ([]Entry, bool) {
	_, vals, more := l.items.PageDesc(mp, before, limit, nil)
	return vals, more
}

// Record writes an entry on its own, for a change kept on another log than
// the accounts log (an invitation): written after the change, so a failure
// between the two leaves the change without its entry. Nothing is written
// when ctx has no actor.
func (l *Log) Record(ctx context.Context, mp, action, target, detail string, now time.Time) error {
	c, ok := Change(ctx, mp, action, target, detail, now)
	if !ok {
		return nil
	}
	_, id, _ := strings.Cut(c.ID, "/")
	_, err := l.items.Put(ctx, mp, id, 0, c.State.(Entry))
	return err
}

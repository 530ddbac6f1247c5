package users_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestAccountsPerMarketplace: an address has at most one account on each
// marketplace and may have one on several; a user recorded under the
// legacy id (the address alone) still signs in and still holds its
// address on its marketplace; a password is checked against each account
// of the address, or the one of the marketplace asked for.
func TestAccountsPerMarketplace(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var us *users.Service
	log := testenv.StateLog(t, brokers, testenv.StateLogOptions{Accounts: true}, func(l *statelog.Log) { us = users.New(l, nil) })
	const email, legacyPW, otherPW = "Shared@Example.com", "the legacy account's password", "the other account's password"
	// A user written before ids named the marketplace.
	hash, err := users.HashPassword(ctx, legacyPW)
	if err != nil {
		t.Fatal(err)
	}
	legacy := users.User{ID: users.LegacyIDOf(email), Email: email, MarketplaceID: "mp-old", Role: users.RoleAdmin, PasswordHash: hash,
		CreatedAt: time.Now().UTC().Truncate(time.Second), Epoch: 1}
	if _, err := log.AppendBatch(ctx, []statelog.Change{{Type: "user", ID: legacy.ID, Expected: 0, State: legacy}}); err != nil {
		t.Fatal(err)
	}
	if u, ok := us.Lookup("mp-old", "shared@example.com "); !ok || u.ID != legacy.ID {
		t.Fatalf("the legacy user by address: %+v %v", u, ok)
	}
	// Its marketplace cannot have a second user of the address (the index finds the legacy id).
	if _, err := us.CreateAdmin(ctx, "mp-old", "shared@example.com", "some other long password"); !errors.Is(err, users.ErrEmailTaken) {
		t.Fatalf("a second user of the address on the legacy user's marketplace: %v", err)
	}
	// Another marketplace can, with an id of its own.
	a, err := us.CreateAdmin(ctx, "mp-a", "shared@example.com", otherPW)
	if err != nil || a.ID != users.IDOf("mp-a", email) || a.ID == legacy.ID {
		t.Fatalf("the address on another marketplace: %+v %v", a, err)
	}
	if _, err := us.CreateAdmin(ctx, "mp-a", "SHARED@example.com", otherPW); !errors.Is(err, users.ErrEmailTaken) {
		t.Fatalf("a second user of the address on mp-a: %v", err)
	}
	// The log refuses a second user of (marketplace, address) that this process's index has not seen yet.
	dup := a
	dup.Role = users.RoleVendorAnalyst
	if _, err := log.AppendBatch(ctx, []statelog.Change{{Type: "user", ID: users.IDOf("mp-a", "shared@EXAMPLE.com"), Expected: 0, State: dup}}); errkind.KindOf(err) != errkind.Conflict {
		t.Fatalf("a second write of a new id: %v, want a conflict", err)
	}
	b, err := us.CreateAdmin(ctx, "mp-b", email, legacyPW)
	if err != nil {
		t.Fatal(err)
	}
	if got := us.Accounts("shared@EXAMPLE.com"); len(got) != 3 || got[0].MarketplaceID != "mp-a" || got[1].MarketplaceID != "mp-b" || got[2].MarketplaceID != "mp-old" {
		t.Fatalf("accounts of the address: %+v", got)
	}
	ids := func(us []users.User) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name, mp, password string
		want               []string
	}{
		{"the legacy password, any marketplace", "", legacyPW, []string{b.ID, legacy.ID}},
		{"the legacy password, its marketplace", "mp-old", legacyPW, []string{legacy.ID}},
		{"the legacy password, mp-b", "mp-b", legacyPW, []string{b.ID}},
		{"the other password", "", otherPW, []string{a.ID}},
		{"the other password, mp-a", "mp-a", otherPW, []string{a.ID}},
		{"the other password on mp-b", "mp-b", otherPW, nil},
		{"a wrong password", "", "not any of the passwords", nil},
		{"a marketplace without the address", "mp-none", legacyPW, nil},
	} {
		got, err := us.Authenticate(ctx, tc.mp, email, tc.password)
		if tc.want == nil {
			if !errors.Is(err, users.ErrBadPassword) {
				t.Errorf("%s: %v %v, want ErrBadPassword", tc.name, ids(got), err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, ids(got), err, tc.want)
			continue
		}
		for i := range got {
			if got[i].ID != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, ids(got), tc.want)
			}
		}
	}
	// The legacy user's password changes, and its sessions' epoch moves, under its own id.
	if u, err := us.SetPassword(ctx, legacy.ID, "a new legacy password"); err != nil || u.ID != legacy.ID || u.Epoch != 2 {
		t.Fatalf("set the legacy user's password: %+v %v", u, err)
	}
	if err := us.CheckCurrentPassword(ctx, legacy.ID, "a new legacy password"); err != nil {
		t.Fatalf("the legacy user's new password: %v", err)
	}
	if err := us.CheckCurrentPassword(ctx, b.ID, "a new legacy password"); !errors.Is(err, users.ErrBadPassword) {
		t.Fatalf("mp-b's user with the legacy user's new password: %v", err)
	}
}

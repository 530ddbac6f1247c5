package invitations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/fakes"
	"github.com/endcap/endcap/testkit/testenv"
)

func open(t *testing.T, cat entityref.Catalog) *invitations.Service {
	t.Helper()
	_, brokers := testenv.Kafka(t)
	var svc *invitations.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "inv."}, func(l *statelog.Log) { svc = invitations.New(l, cat) })
	return svc
}

func str(s string) *string { return &s }

func inv(v, e, r string) invitations.Invite {
	return invitations.Invite{VendorID: str(v), VendorEmail: str(e), TargetUserRole: str(r)}
}

func render(err error) []string {
	v, _ := validation.As(err)
	out := make([]string, len(v))
	for i, f := range v {
		out[i] = strings.Trim(fmt.Sprint(f.Loc), "[]") + ":" + f.Type
	}
	return out
}

func TestCreateValidation(t *testing.T) {
	svc := open(t, fakes.NewCatalog("mp/v-1", "mp/v-2", "other/v-3"))
	ctx := context.Background()
	many := make([]invitations.Invite, 501)
	for i := range many {
		many[i] = inv("v-1", fmt.Sprintf("u%d@example.com", i), "vendor_analyst")
	}
	empty := []invitations.Invite{}
	one := func(i invitations.Invite) *[]invitations.Invite { return &[]invitations.Invite{i} }
	cases := []struct {
		name string
		in   *[]invitations.Invite
		want []string
	}{
		{"absent", nil, []string{"body invites:missing"}},
		{"empty", &empty, []string{"body invites:too_short"}},
		{"501", &many, []string{"body invites:too_long"}},
		{"missing fields", one(invitations.Invite{}), []string{"body invites 0 vendorId:missing", "body invites 0 vendorEmail:missing", "body invites 0 targetUserRole:missing"}},
		{"bad email", one(inv("v-1", "not-an-email", "vendor_analyst")), []string{"body invites 0 vendorEmail:value_error"}},
		{"named email", one(inv("v-1", "Ann <ann@example.com>", "vendor_analyst")), []string{"body invites 0 vendorEmail:value_error"}},
		{"bad role", one(inv("v-1", "a@example.com", "owner")), []string{"body invites 0 targetUserRole:enum"}},
		{"vendor of other marketplace", one(inv("v-3", "a@example.com", "vendor_admin")), []string{"body invites 0 vendorId:not_found"}},
		{"vendor id too long", one(inv(strings.Repeat("v", 256), "a@example.com", "vendor_admin")), []string{"body invites 0 vendorId:too_long"}},
		{"each missing vendor named", &[]invitations.Invite{inv("v-1", "a@example.com", "vendor_admin"), inv("x", "a@example.com", "vendor_admin"), inv("y", "b@example.com", "vendor_admin")},
			[]string{"body invites 1 vendorId:not_found", "body invites 2 vendorId:not_found"}},
		{"duplicate in request", &[]invitations.Invite{inv("v-1", "a@example.com", "vendor_admin"), inv("v-1", "A@Example.com", "vendor_analyst")},
			[]string{"body invites 1:value_error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Create(ctx, "mp", tc.in)
			if got := render(err); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if invs, _ := svc.List("mp", "", "", 100); len(invs) != 0 {
		t.Fatalf("rejected requests stored %d invitations", len(invs))
	}
}

func TestCreateAndList(t *testing.T) {
	svc := open(t, fakes.NewCatalog("mp/v-1", "mp/v-2"))
	ctx := context.Background()
	in := make([]invitations.Invite, 500)
	for i := range in {
		in[i] = inv([]string{"v-1", "v-2"}[i%2], fmt.Sprintf("u%d@example.com", i), "vendor_analyst")
	}
	out, err := svc.Create(ctx, "mp", &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 500 || out[0].Status != "pending" || !out[0].ExpiresAt.Equal(out[0].CreatedAt.Add(invitations.TTL)) {
		t.Fatalf("created: %d %+v", len(out), out[0])
	}
	got, more := svc.List("mp", "v-2", "", 100)
	if len(got) != 100 || !more || got[0].ID != out[1].ID || got[0].VendorEmail != "u1@example.com" {
		t.Fatalf("list v-2: %d %v %+v", len(got), more, got[0])
	}
	if _, more := svc.List("mp", "v-2", got[99].ID, 150); more {
		t.Fatal("v-2 has 250 invitations")
	}
	if _, _, err := svc.Get("other", out[0].ID); err == nil {
		t.Fatal("invitation visible to another marketplace")
	}
	if i, v, err := svc.Get("mp", out[0].ID); err != nil || v != 1 || i != out[0] {
		t.Fatalf("get: %v %d %+v", err, v, i)
	}
	if s := out[0].StatusAt(out[0].ExpiresAt); s != "expired" {
		t.Fatalf("status at expiry %q", s)
	}
}

// TestDailyMailCap: with a cap, a marketplace's invitations of a UTC day
// (one e-mail each) are counted: a request that would pass the cap creates
// nothing and is a CapError (TooMany, with the next day's start), another
// marketplace counts apart, and the retry of a request with an idempotency
// key that created its invitations counts nothing more.
func TestDailyMailCap(t *testing.T) {
	mp, mp2, mp3 := "mp-"+uuid.NewString(), "mp2-"+uuid.NewString(), "mp3-"+uuid.NewString()
	svc := open(t, fakes.NewCatalog(mp+"/v-1", mp2+"/v-1", mp3+"/v-1"))
	rdb := testenv.Get(t).Redis(t)
	defer rdb.Close()
	svc.SetDailyMailCap(rdb, 5)
	batch := func(prefix string, n int) *[]invitations.Invite {
		in := make([]invitations.Invite, n)
		for i := range in {
			in[i] = inv("v-1", fmt.Sprintf("%s%d@example.com", prefix, i), "vendor_analyst")
		}
		return &in
	}
	ctx := context.Background()
	if _, err := svc.Create(ctx, mp, batch("a", 3)); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Create(ctx, mp, batch("b", 3)) // 6 > 5
	capErr, ok := errors.AsType[*invitations.CapError](err)
	if !ok || errkind.KindOf(err) != errkind.TooMany || capErr.Limit != 5 || !capErr.Reset.Equal(time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour)) {
		t.Fatalf("past the cap: %v", err)
	}
	if invs, _ := svc.List(mp, "", "", 100); len(invs) != 3 {
		t.Fatalf("%d invitations stored, want 3", len(invs))
	}
	if _, err := svc.Create(ctx, mp, batch("c", 6)); errkind.KindOf(err) != errkind.TooMany {
		t.Fatalf("more than the cap in one request: %v", err)
	}
	// Up to the cap; another marketplace apart.
	if _, err := svc.Create(ctx, mp, batch("d", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, mp, batch("e", 1)); errkind.KindOf(err) != errkind.TooMany {
		t.Fatalf("one past the cap: %v", err)
	}
	if _, err := svc.Create(ctx, mp2, batch("a", 5)); err != nil {
		t.Fatalf("another marketplace: %v", err)
	}
	// A keyed request replayed after it created its invitations: not
	// counted again.
	kctx := idempotency.WithRequest(ctx, mp3, "key-1", "fp", time.Now())
	first, err := svc.Create(kctx, mp3, batch("k", 2))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := svc.Create(kctx, mp3, batch("k", 2)); err != nil || again[0].ID != first[0].ID {
		t.Fatalf("replay: %v", err)
	}
	if _, err := svc.Create(ctx, mp3, batch("l", 3)); err != nil {
		t.Fatalf("the replay was counted: %v", err)
	}
	if _, err := svc.Create(ctx, mp3, batch("m", 1)); errkind.KindOf(err) != errkind.TooMany {
		t.Fatalf("mp3 past its cap: %v", err)
	}
}

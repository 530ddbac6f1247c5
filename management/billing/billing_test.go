package billing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/fakes"
	"github.com/endcap/endcap/testkit/testenv"
)

// open starts a billing service on a fresh entities topic of brokers.
func open(t *testing.T, brokers []string, prefix string, cat entityref.Catalog) *billing.Service {
	t.Helper()
	var svc *billing.Service
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: prefix}, func(l *statelog.Log) { svc = billing.New(l, cat) })
	return svc
}

func locs(err error) []string {
	v, _ := validation.As(err)
	out := make([]string, len(v))
	for i, f := range v {
		s := ""
		for j, l := range f.Loc {
			if j > 0 {
				s += "."
			}
			switch x := l.(type) {
			case string:
				s += x
			case int:
				s += string(rune('0' + x))
			}
		}
		out[i] = s + ":" + f.Type
	}
	return out
}

func TestContactValidation(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers, "bv.", fakes.NewCatalog())
	ctx := context.Background()
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	}
	cases := []struct {
		name string
		in   billing.ContactInput
		want []string
	}{
		{"missing name and email", billing.ContactInput{}, []string{"body.name:missing", "body.email:missing"}},
		{"blank name", billing.ContactInput{Name: "  ", Email: "a@b.co"}, []string{"body.name:missing"}},
		{"name too long", billing.ContactInput{Name: long(256), Email: "a@b.co"}, []string{"body.name:too_long"}},
		{"display name in email", billing.ContactInput{Name: "A", Email: "Ann <a@b.co>"}, []string{"body.email:value_error"}},
		{"email without at", billing.ContactInput{Name: "A", Email: "ann.example.com"}, []string{"body.email:value_error"}},
		{"email without dot in domain", billing.ContactInput{Name: "A", Email: "ann@localhost"}, []string{"body.email:value_error"}},
		{"tax id too long", billing.ContactInput{Name: "A", Email: "a@b.co", TaxID: long(65)}, []string{"body.taxId:too_long"}},
		{"company too long", billing.ContactInput{Name: "A", Email: "a@b.co", Company: long(256)}, []string{"body.company:too_long"}},
		{"bad country", billing.ContactInput{Name: "A", Email: "a@b.co", Address: &billing.Address{Country: "XX"}}, []string{"body.address.country:value_error"}},
		{"numeric country", billing.ContactInput{Name: "A", Email: "a@b.co", Address: &billing.Address{Country: "276"}}, []string{"body.address.country:value_error"}},
		{"postal code too long", billing.ContactInput{Name: "A", Email: "a@b.co", Address: &billing.Address{PostalCode: long(33)}}, []string{"body.address.postalCode:too_long"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := svc.Create(ctx, "mp-1", tc.in)
			got := locs(err)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	c, v, err := svc.Create(ctx, "mp-1", billing.ContactInput{Name: " Ann ", Email: "ann@example.com", Address: &billing.Address{Country: "de", City: " Berlin "}})
	if err != nil || v != 1 {
		t.Fatalf("create: %v %d", err, v)
	}
	if c.Name != "Ann" || c.Address.Country != "DE" || c.Address.City != "Berlin" {
		t.Fatalf("not normalised: %+v %+v", c, c.Address)
	}
	// An empty address is no address.
	c2, _, err := svc.Create(ctx, "mp-1", billing.ContactInput{Name: "B", Email: "b@example.com", Address: &billing.Address{}})
	if err != nil || c2.Address != nil {
		t.Fatalf("empty address: %v %+v", err, c2.Address)
	}
}

func TestLinkRules(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	cat := fakes.NewCatalog("mp-1/v-1", "mp-1/v-2", "mp-2/v-1")
	svc := open(t, brokers, "bl.", cat)
	ctx := context.Background()
	c, _, err := svc.Create(ctx, "mp-1", billing.ContactInput{Name: "Ann", Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if ex, ln := svc.Contact("mp-1", c.ID, "v-1"); !ex || ln {
		t.Fatalf("before link: exists=%v linked=%v", ex, ln)
	}
	for _, v := range []string{"v-1", "v-2"} {
		if _, _, err := svc.LinkContact(ctx, "mp-1", v, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Linking again is idempotent: same version.
	l, ver, err := svc.LinkContact(ctx, "mp-1", "v-1", c.ID)
	if err != nil || ver != 1 || l.VendorID != "v-1" {
		t.Fatalf("relink: %v %d %+v", err, ver, l)
	}
	// Unknown vendor, unknown contact, other marketplace: not found.
	for _, tc := range []struct{ mp, vendor, contact string }{
		{"mp-1", "v-9", c.ID}, {"mp-1", "v-1", "nope"}, {"mp-2", "v-1", c.ID},
	} {
		if _, _, err := svc.LinkContact(ctx, tc.mp, tc.vendor, tc.contact); !errors.Is(err, validation.ErrNotFound) {
			t.Fatalf("link %v: %v", tc, err)
		}
		if err := svc.UnlinkContact(ctx, tc.mp, tc.vendor, tc.contact, 0); !errors.Is(err, validation.ErrNotFound) {
			t.Fatalf("unlink %v: %v", tc, err)
		}
	}
	if ex, ln := svc.Contact("mp-2", c.ID, "v-1"); ex || ln {
		t.Fatal("contact visible in another marketplace")
	}
	// Unlink from v-1: gone from v-1's list, still exists, still linked to v-2.
	if err := svc.UnlinkContact(ctx, "mp-1", "v-1", c.ID, 5); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("unlink with wrong If-Match: %v", err)
	}
	if err := svc.UnlinkContact(ctx, "mp-1", "v-1", c.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := svc.UnlinkContact(ctx, "mp-1", "v-1", c.ID, 0); err != nil {
		t.Fatalf("second unlink is a no-op: %v", err)
	}
	if ex, ln := svc.Contact("mp-1", c.ID, "v-1"); !ex || ln {
		t.Fatalf("after unlink: exists=%v linked=%v", ex, ln)
	}
	if ex, ln := svc.Contact("mp-1", c.ID, "v-2"); !ex || !ln {
		t.Fatalf("other vendor: exists=%v linked=%v", ex, ln)
	}
	if cs, more, err := svc.VendorContacts("mp-1", "v-1", "", 10); err != nil || len(cs) != 0 || more {
		t.Fatalf("v-1 contacts: %v %v %v", cs, more, err)
	}
	if cs, _, err := svc.VendorContacts("mp-1", "v-2", "", 10); err != nil || len(cs) != 1 || cs[0].ID != c.ID {
		t.Fatalf("v-2 contacts: %v %v", cs, err)
	}
	if _, _, err := svc.VendorContacts("mp-1", "v-9", "", 10); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("unknown vendor list: %v", err)
	}
	// Linking again after an unlink works.
	if _, v, err := svc.LinkContact(ctx, "mp-1", "v-1", c.ID); err != nil || v != 3 {
		t.Fatalf("relink after unlink: %v %d", err, v)
	}
	if ex, ln := svc.Contact("mp-1", c.ID, "v-1"); !ex || !ln {
		t.Fatalf("after relink: exists=%v linked=%v", ex, ln)
	}
}

func TestVendorContactsPages(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers, "bp.", fakes.NewCatalog("mp/v"))
	ctx := context.Background()
	var ids []string
	for range 5 {
		c, _, err := svc.Create(ctx, "mp", billing.ContactInput{Name: "N", Email: "n@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
		if _, _, err := svc.LinkContact(ctx, "mp", "v", c.ID); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		cs, more, err := svc.VendorContacts("mp", "v", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got = append(got, c.ID)
		}
		if !more {
			break
		}
		after = cs[len(cs)-1].ID
		if page > 5 {
			t.Fatal("no end")
		}
	}
	if len(got) != 5 {
		t.Fatalf("got %v", got)
	}
	for i := range ids { // UUIDv7: creation order is id order
		if got[i] != ids[i] {
			t.Fatalf("order: got %v want %v", got, ids)
		}
	}
	// Exactly a full page: no "more".
	if cs, more, _ := svc.VendorContacts("mp", "v", ids[2], 2); len(cs) != 2 || more {
		t.Fatalf("last full page: %d %v", len(cs), more)
	}
}

func TestUpdate(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	svc := open(t, brokers, "bu.", fakes.NewCatalog())
	ctx := context.Background()
	c, _, err := svc.Create(ctx, "mp", billing.ContactInput{Name: "Ann", Email: "ann@example.com", Company: "ACME", Address: &billing.Address{City: "Paris"}})
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	if _, _, err := svc.Update(ctx, "mp", c.ID, 0, billing.ContactPatch{Email: str("bad")}); len(locs(err)) != 1 {
		t.Fatalf("bad email: %v", err)
	}
	if _, _, err := svc.Update(ctx, "mp", c.ID, 0, billing.ContactPatch{Name: str("")}); len(locs(err)) != 1 {
		t.Fatalf("empty name: %v", err)
	}
	if _, _, err := svc.Update(ctx, "mp", c.ID, 7, billing.ContactPatch{Name: str("X")}); !errors.Is(err, statelog.ErrConflict) {
		t.Fatalf("if-match: %v", err)
	}
	if _, _, err := svc.Update(ctx, "other", c.ID, 0, billing.ContactPatch{Name: str("X")}); !errors.Is(err, validation.ErrNotFound) {
		t.Fatalf("other marketplace: %v", err)
	}
	u, v, err := svc.Update(ctx, "mp", c.ID, 1, billing.ContactPatch{Company: str(""), Address: &billing.Address{}, TaxID: str("DE123")})
	if err != nil || v != 2 {
		t.Fatalf("update: %v %d", err, v)
	}
	if u.Name != "Ann" || u.Email != "ann@example.com" || u.Company != "" || u.Address != nil || u.TaxID != "DE123" || !u.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("updated: %+v", u)
	}
}

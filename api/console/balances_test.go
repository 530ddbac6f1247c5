package console_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/testkit/testenv"
)

var requestKeyField = regexp.MustCompile(`name="requestKey" value="([^"]+)"`)

// TestBalancePages: the operators' balances list (balances off said; a
// vendor out of funds once they are on), a vendor's top-up form that
// credits once when submitted twice, the routes' refusals of amounts on the
// form (nothing credited), the credit-limit form, the ledger's pages; a
// vendor user's own balance and ledger, read-only, and none of the
// operators' pages or forms.
func TestBalancePages(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.admin(t)
	r := c.do("GET", "/console/balances", nil)
	if r.status != 200 || !strings.Contains(r.body, `data-testid="balances-off"`) || !strings.Contains(r.body, `data-vendor="v-1"`) || !strings.Contains(r.body, `data-vendor="v-2"`) {
		t.Fatalf("balances, off: %d", r.status)
	}
	if strings.Contains(r.body, "out of funds</span>") {
		t.Error("a vendor out of funds while balances are off")
	}
	if _, err := s.a.Accounts.SetBalances(ctx, s.mp.ID, true, 0); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if m, _ := s.a.Accounts.Marketplace(s.mp.ID); !m.Balances {
			return testenv.Errorf("balances not on")
		}
		return nil
	})
	r = c.do("GET", "/console/balances", nil)
	if strings.Contains(r.body, `data-testid="balances-off"`) || !regexp.MustCompile(`data-vendor="v-1">[^\n]*\n[^\n]*out of funds</span>`).MatchString(r.body) {
		t.Fatalf("balances, on: a vendor without funds is not out of them")
	}

	// Top up, twice with the form's request key: credited once.
	page := "/console/balances/v-1"
	r = c.do("GET", page, nil)
	key := requestKeyField.FindStringSubmatch(r.body)
	if key == nil || !strings.Contains(r.body, `data-testid="top-up"`) {
		t.Fatalf("no top-up form: %d", r.status)
	}
	tok := c.csrf(page)
	form := url.Values{"csrf": {tok}, "requestKey": {key[1]}, "amount": {"12.5"}, "description": {"first payment"}}
	for i := range 2 {
		if r = c.do("POST", page+"/top-up", form); r.status != 303 || r.header.Get("Location") != page+"?done=top-up" {
			t.Fatalf("top-up %d: %d %s", i, r.status, errorOf(r.body))
		}
	}
	bal, err := s.a.Balances.Get(ctx, s.mp.ID, "v-1")
	if err != nil || bal.Credited != 12_500_000 {
		t.Fatalf("credited %d after a double submit, want 12500000 (%v)", bal.Credited, err)
	}
	// The API's refusals of an amount, on the page; nothing credited.
	for _, tc := range []struct{ amount, want string }{
		{"", "Amount: Field required"},
		{"abc", "Amount: value is not a valid number"},
		{"0", "Amount: ensure this value is greater than 0"},
		{"-3", "Amount: ensure this value is greater than 0"},
		{"1.1234567", "Amount: ensure that there are no more than 6 decimal places"},
		{"2000000000", "Amount: ensure this value is at most 1000000000"},
	} {
		r = c.do("POST", page+"/top-up", url.Values{"csrf": {tok}, "requestKey": {uuid.Must(uuid.NewV7()).String()}, "amount": {tc.amount}})
		if body := html.UnescapeString(r.body); r.status != 422 || !strings.Contains(body, tc.want) || !strings.Contains(body, `id="amount" name="amount" inputmode="decimal" required value="`+tc.amount+`"`) {
			t.Errorf("amount %q: %d %q, want 422 with %q", tc.amount, r.status, errorOf(r.body), tc.want)
		}
	}
	// A new form (a new key): credited again.
	form.Set("requestKey", uuid.Must(uuid.NewV7()).String())
	form.Set("amount", "0.5")
	if r = c.do("POST", page+"/top-up", form); r.status != 303 {
		t.Fatalf("second top-up: %d %s", r.status, errorOf(r.body))
	}
	// The credit limit.
	if r = c.do("POST", page+"/credit-limit", url.Values{"csrf": {tok}, "requestKey": {uuid.Must(uuid.NewV7()).String()}, "creditLimit": {"2"}}); r.status != 303 {
		t.Fatalf("credit limit: %d %s", r.status, errorOf(r.body))
	}
	r = c.do("POST", page+"/credit-limit", url.Values{"csrf": {tok}, "requestKey": {uuid.Must(uuid.NewV7()).String()}, "creditLimit": {"-1"}})
	if r.status != 422 || !strings.Contains(html.UnescapeString(r.body), "CreditLimit: ensure this value is greater than 0") || !strings.Contains(r.body, `name="creditLimit" inputmode="decimal" required value="-1"`) {
		t.Errorf("a negative credit limit: %d %q", r.status, errorOf(r.body))
	}
	// A refused top-up: the credit-limit form shows the limit as it is.
	r = c.do("POST", page+"/top-up", url.Values{"csrf": {tok}, "requestKey": {uuid.Must(uuid.NewV7()).String()}, "amount": {"x"}})
	if r.status != 422 || !strings.Contains(r.body, `name="creditLimit" inputmode="decimal" required value="2"`) {
		t.Errorf("a refused top-up's page: %d, the credit limit not shown", r.status)
	}
	bal, err = s.a.Balances.Get(ctx, s.mp.ID, "v-1")
	if err != nil || bal.Credited != 13_000_000 || bal.CreditLimit != 2_000_000 || bal.Available() != 15_000_000 {
		t.Fatalf("funds %+v (%v)", bal, err)
	}
	r = c.do("GET", page+"?done=top-up", nil)
	r.body = html.UnescapeString(r.body)
	for _, want := range []string{"The amount was added to the vendor's balance.", "<dt>Balance</dt><dd>13.00</dd>", "<dt>Credit limit</dt><dd>2.00</dd>",
		"<dt>Available</dt><dd>15.00</dd>", `data-testid="out-of-funds">no`, "first payment", "credit limit set"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the balance page lacks %q", want)
		}
	}
	if n := strings.Count(r.body, "data-movement="); n != 3 {
		t.Errorf("%d movements listed, want 3", n)
	}
	// The ledger's pages: 20 movements a page, newest first.
	for i := range 19 {
		if _, err := s.a.Balances.TopUp(ctx, s.mp.ID, "v-1", 1_000_000, fmt.Sprintf("top-up %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	r = c.do("GET", page, nil)
	older := regexp.MustCompile(`href="(/console/balances/v-1\?before=[^"]+)">Older movements`).FindStringSubmatch(r.body)
	if n := strings.Count(r.body, "data-movement="); n != 20 || older == nil || !strings.Contains(r.body, "top-up 18") {
		t.Fatalf("first ledger page: %d movements, next %v", n, older)
	}
	r = c.do("GET", html.UnescapeString(older[1]), nil)
	if n := strings.Count(r.body, "data-movement="); n != 2 || !strings.Contains(r.body, "first payment") || strings.Contains(r.body, "Older movements") {
		t.Errorf("second ledger page: %d movements", n)
	}
	if r = c.do("GET", "/console/balances/nobody", nil); r.status != 404 {
		t.Errorf("an unknown vendor: %d", r.status)
	}
	if r = c.do("GET", "/console/balance", nil); r.status != 303 || r.header.Get("Location") != "/console/balances" {
		t.Errorf("an admin's /console/balance: %d", r.status)
	}

	// A vendor user: its own balance and ledger, no form; none of the operators' pages.
	vu := s.vendorUser(t, "v-1", "funds@one.test")
	r = vu.do("GET", "/console/balance", nil)
	if r.status != 200 || !strings.Contains(r.body, "<dt>Balance</dt><dd>32.00</dd>") || strings.Contains(r.body, `data-testid="top-up"`) ||
		strings.Contains(r.body, `data-testid="credit-limit"`) || strings.Count(r.body, "data-movement=") != 20 || !strings.Contains(r.body, `href="/console/balance?before=`) {
		t.Fatalf("vendor user's balance: %d", r.status)
	}
	vtok := vu.csrf("/console/balance")
	for _, p := range []string{"/console/balances", "/console/balances/v-1", "/console/balances/v-2"} {
		if r = vu.do("GET", p, nil); r.status != 403 {
			t.Errorf("vendor user: GET %s %d", p, r.status)
		}
	}
	if r = vu.do("POST", "/console/balances/v-1/top-up", url.Values{"csrf": {vtok}, "requestKey": {uuid.Must(uuid.NewV7()).String()}, "amount": {"100"}}); r.status != 403 {
		t.Errorf("vendor user's top-up: %d", r.status)
	}
	if bal, _ := s.a.Balances.Get(ctx, s.mp.ID, "v-1"); bal.Credited != 32_000_000 {
		t.Errorf("a vendor user's top-up credited: %d", bal.Credited)
	}
	two := s.vendorUser(t, "v-2", "funds@two.test")
	if r = two.do("GET", "/console/balance", nil); r.status != 200 || !strings.Contains(r.body, "<dt>Balance</dt><dd>0.00</dd>") || !strings.Contains(r.body, "No movement yet.") {
		t.Errorf("the other vendor's user: %d", r.status)
	}
}

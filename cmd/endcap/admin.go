package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/statelog"
)

// adminSession is a short-lived view of the accounts log, enough to validate
// and append one change.
type adminSession struct {
	acc    *accounts.Service
	users  *users.Service
	cancel func()
	done   chan struct{}
}

func openAdmin(ctx context.Context, cfg config.Config) (*adminSession, error) {
	log := newLogger(cfg, "warn")
	conn, err := app.KafkaSecurity(cfg).Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := kafka.Check(ctx, cfg.KafkaBrokers, conn, 5*time.Second); err != nil {
		if se := (*kafka.SettingError)(nil); errors.As(err, &se) {
			return nil, err
		}
	}
	cl, err := kafka.NewClient(cfg.KafkaBrokers, log, conn.With(kgo.ClientID("endcap-admin"))...)
	if err != nil {
		return nil, err
	}
	topics := kafka.TopicNames(cfg.KafkaTopicPrefix)
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = kafka.EnsureTopics(tctx, cl, kafka.Specs(topics, cfg.KafkaEventsPartitions, cfg.KafkaReplicationFactor, cfg.KafkaEventsRetention, cfg.KafkaAuctionsRetention))
	cancel()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka at %v: %w", cfg.KafkaBrokers, err)
	}
	sl, err := statelog.New(topics.Accounts, cfg.KafkaBrokers, cl, log, conn...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	s := &adminSession{acc: accounts.New(sl), users: users.New(sl, nil), done: make(chan struct{})}
	rctx, rcancel := context.WithCancel(context.Background())
	go func() { defer close(s.done); _ = sl.Run(rctx) }()
	s.cancel = func() { rcancel(); <-s.done; sl.Close(); cl.Close() }
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := sl.WaitReady(wctx); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

func cmdAdmin(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: endcap admin marketplace create|list|set-reserve|set-attribution|set-sso-only|set-balances, endcap admin key create|list|revoke, endcap admin user create|list|set-password, endcap admin secrets bid-keys|wrap-plaintext, endcap admin report scored-attribution, endcap admin privacy run, endcap admin spend check|fix, endcap admin backup create|restore (endcap help)")
	}
	what, verb, rest := args[0], args[1], args[2:]
	// Changes made here are audited as the CLI's (management/audit).
	ctx = audit.WithActor(ctx, audit.Actor{Kind: "cli"})
	if what == "user" {
		return cmdUser(ctx, verb, rest)
	}
	if what == "report" {
		return cmdReport(ctx, verb, rest) // report.go
	}
	if what == "privacy" {
		return cmdPrivacy(ctx, os.Stdout, verb, rest) // privacy.go
	}
	if what == "secrets" {
		return cmdSecrets(ctx, verb, rest)
	}
	if what == "spend" {
		return cmdSpend(ctx, verb, rest) // spend.go
	}
	if what == "backup" {
		return cmdBackup(ctx, verb, rest) // backup.go
	}
	var (
		name, currency, tz, marketplace, keyType, keyID string
		reserveCPC, reserveCPM                          string
		attr                                            attributionFlags
		ssoOnly, keyVendor                              string
		balances, lowBalance                            string
	)
	cfg, fs, err := parse("admin "+what+" "+verb, rest, func(fs *flag.FlagSet) {
		switch what + " " + verb {
		case "marketplace create":
			fs.StringVar(&name, "name", "", "marketplace name (required)")
			fs.StringVar(&currency, "currency", "USD", "ISO 4217 currency code")
			fs.StringVar(&tz, "timezone", "UTC", "IANA time zone that defines day_local")
		case "marketplace set-reserve":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			fs.StringVar(&reserveCPC, "cpc", "0", "reserve price of CPC bids, per click, in the marketplace currency (0: none)")
			fs.StringVar(&reserveCPM, "cpm", "0", "reserve price of CPM bids, per 1,000 impressions (0: none)")
		case "marketplace set-attribution":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			attr.register(fs)
		case "marketplace set-sso-only":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			fs.StringVar(&ssoOnly, "sso-only", "", "on: the marketplace's console users sign in by single sign-on only; off: passwords too (required)")
		case "marketplace set-balances":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			fs.StringVar(&balances, "balances", "", "on: vendors pay from balances (top-ups, credit limits; docs/reference/balances.md); off: no balances (required)")
			fs.StringVar(&lowBalance, "low-balance", "0", "available funds below which vendor.balance_low goes out, in the marketplace currency (0: when they run out)")
		case "key create":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			fs.StringVar(&keyType, "type", "", "marketplace or advanced (required)")
			fs.StringVar(&keyVendor, "vendor", "", "an advanced key scoped to this vendor (its catalog id): it reads that vendor's reports only (docs/reference/reporting-api.md)")
		case "key list":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
		case "key revoke":
			fs.StringVar(&keyID, "id", "", "key id (required)")
		}
	})
	if err != nil {
		return err
	}
	_ = fs
	sess, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer sess.cancel()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if what+" "+verb == "marketplace set-reserve" {
		return setReserve(wctx, sess.acc, os.Stdout, marketplace, reserveCPC, reserveCPM)
	}
	if what+" "+verb == "marketplace set-attribution" {
		return setAttribution(wctx, sess.acc, os.Stdout, marketplace, attr)
	}
	if what+" "+verb == "marketplace set-sso-only" {
		return setSSOOnly(wctx, sess.acc, os.Stdout, marketplace, ssoOnly)
	}
	if what+" "+verb == "marketplace set-balances" {
		return setBalances(wctx, sess.acc, os.Stdout, marketplace, balances, lowBalance)
	}
	return runAdmin(wctx, sess.acc, os.Stdout, what+" "+verb, name, currency, tz, marketplace, keyType, keyID, keyVendor)
}

// setReserve is `admin marketplace set-reserve`.
func setReserve(ctx context.Context, acc *accounts.Service, out io.Writer, marketplace, cpc, cpm string) error {
	if marketplace == "" {
		return errors.New("--marketplace is required")
	}
	cpcMicros, err := moneyFlag("cpc", cpc)
	if err != nil {
		return err
	}
	cpmMicros, err := moneyFlag("cpm", cpm)
	if err != nil {
		return err
	}
	m, err := acc.SetReserve(ctx, marketplace, cpcMicros, cpmMicros)
	if err != nil {
		return err
	}
	return printJSON(out, m)
}

// moneyFlag reads the amount of flag name in the marketplace currency, in
// micro-units ("", 0 or 0.0: none).
func moneyFlag(name, s string) (int64, error) {
	if strings.Trim(s, "0.") == "" {
		return 0, nil
	}
	m, err := campaigns.ParseMoneyText(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: %v", name, s, err)
	}
	return m, nil
}

// onOff reads flag name, on or off.
func onOff(name, s string) (bool, error) {
	if s != "on" && s != "off" {
		return false, fmt.Errorf("--%s %q: want on or off", name, s)
	}
	return s == "on", nil
}

// printJSON prints v as the admin commands do: indented JSON.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// setSSOOnly is `admin marketplace set-sso-only`.
func setSSOOnly(ctx context.Context, acc *accounts.Service, out io.Writer, marketplace, on string) error {
	if marketplace == "" {
		return errors.New("--marketplace is required")
	}
	ssoOnly, err := onOff("sso-only", on)
	if err != nil {
		return err
	}
	m, err := acc.SetSSOOnly(ctx, marketplace, ssoOnly)
	if err != nil {
		return err
	}
	return printJSON(out, m)
}

// setBalances is `admin marketplace set-balances`.
func setBalances(ctx context.Context, acc *accounts.Service, out io.Writer, marketplace, on, low string) error {
	if marketplace == "" {
		return errors.New("--marketplace is required")
	}
	balances, err := onOff("balances", on)
	if err != nil {
		return err
	}
	lowMicros, err := moneyFlag("low-balance", low)
	if err != nil {
		return err
	}
	m, err := acc.SetBalances(ctx, marketplace, balances, lowMicros)
	if err != nil {
		return err
	}
	return printJSON(out, m)
}

// attributionFlags are the flags of `admin marketplace set-attribution`.
type attributionFlags struct {
	format, click, impression, halo string
	reset                           bool
}

func (f *attributionFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "all", "ad format whose windows --click and --impression set: listings, banners, sponsored_brand, hotels, flights or all")
	fs.StringVar(&f.click, "click", "", "click window, e.g. 14d, 36h, 90m; 0: clicks of the format are never credited (empty: unchanged)")
	fs.StringVar(&f.impression, "impression", "", "impression window, same form (empty: unchanged)")
	fs.StringVar(&f.halo, "halo", "", "on or off: same-vendor attribution (empty: unchanged)")
	fs.BoolVar(&f.reset, "reset", false, "start from the defaults (every window, halo on) before applying the other flags")
}

// setAttribution is `admin marketplace set-attribution`: it changes the
// given windows of the marketplace's current settings and prints the
// marketplace and its effective windows (docs/design/attribution.md).
func setAttribution(ctx context.Context, acc *accounts.Service, out io.Writer, marketplace string, f attributionFlags) error {
	if marketplace == "" {
		return errors.New("--marketplace is required")
	}
	m, ok := acc.Marketplace(marketplace)
	if !ok {
		return fmt.Errorf("marketplace %s not found", marketplace)
	}
	cur := m.Attribution
	if f.reset {
		cur = nil
	}
	rules := attribution.RulesOf(cur)
	windows := map[string]accounts.AttributionWindow{}
	if cur != nil {
		maps.Copy(windows, cur.Windows)
	}
	formats := accounts.AttributionAdFormats
	if f.format != "all" {
		if !slices.Contains(formats, f.format) {
			return fmt.Errorf("--format %q: want one of %s or all", f.format, strings.Join(formats, ", "))
		}
		formats = []string{f.format}
	}
	click, err := parseWindow("click", f.click)
	if err != nil {
		return err
	}
	impression, err := parseWindow("impression", f.impression)
	if err != nil {
		return err
	}
	if click >= 0 || impression >= 0 {
		for _, format := range formats {
			w := rules.Windows[format]
			if click >= 0 {
				w.Click = click
			}
			if impression >= 0 {
				w.Impression = impression
			}
			windows[format] = accounts.AttributionWindow{ClickSeconds: int64(w.Click / time.Second), ImpressionSeconds: int64(w.Impression / time.Second)}
		}
	}
	noHalo := cur != nil && cur.NoHalo
	switch f.halo {
	case "":
	case "on":
		noHalo = false
	case "off":
		noHalo = true
	default:
		return fmt.Errorf("--halo %q: want on or off", f.halo)
	}
	if m, err = acc.SetAttribution(ctx, marketplace, windows, noHalo); err != nil {
		return err
	}
	effective := attribution.RulesOf(m.Attribution)
	type window struct {
		Click      string `json:"click"`
		Impression string `json:"impression"`
	}
	eff := map[string]window{}
	for format, w := range effective.Windows {
		eff[format] = window{w.Click.String(), w.Impression.String()}
	}
	return printJSON(out, struct {
		Marketplace accounts.Marketplace `json:"marketplace"`
		Windows     map[string]window    `json:"effectiveWindows"`
		Halo        bool                 `json:"halo"`
	}{m, eff, effective.Halo})
}

// parseWindow reads a window flag: whole days ("14d") or a Go duration
// ("36h", "90m"), whole seconds, at most 30 days; -1 when empty.
func parseWindow(name, s string) (time.Duration, error) {
	if s == "" {
		return -1, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("--%s %q: want whole days (14d) or a duration (36h, 90m)", name, s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--%s %q: want whole days (14d) or a duration (36h, 90m)", name, s)
		}
	}
	if d < 0 || d > accounts.MaxAttributionWindowSeconds*time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("--%s %q: a window is 0 to 30 days, in whole seconds", name, s)
	}
	return d, nil
}

func runAdmin(ctx context.Context, acc *accounts.Service, out io.Writer, op, name, currency, tz, marketplace, keyType, keyID, keyVendor string) error {
	switch op {
	case "marketplace create":
		m, err := acc.CreateMarketplace(ctx, name, currency, tz)
		if err != nil {
			return err
		}
		return printJSON(out, m)
	case "marketplace list":
		return printJSON(out, acc.Marketplaces())
	case "key create":
		if marketplace == "" {
			return errors.New("--marketplace is required")
		}
		t, err := accounts.ParseKeyType(keyType)
		if err != nil {
			return err
		}
		secret, k, err := acc.CreateKeyWith(ctx, marketplace, t, accounts.KeyOptions{VendorID: keyVendor})
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "The key is shown only this once; store it now.")
		return printJSON(out, struct {
			Key string `json:"key"`
			accounts.APIKey
		}{secret, k})
	case "key list":
		if marketplace == "" {
			return errors.New("--marketplace is required")
		}
		return printJSON(out, acc.Keys(marketplace))
	case "key revoke":
		if keyID == "" {
			return errors.New("--id is required")
		}
		k, err := acc.RevokeKey(ctx, keyID)
		if err != nil {
			return err
		}
		return printJSON(out, k)
	}
	return fmt.Errorf("unknown admin command %q", op)
}

// cmdSecrets is `endcap admin secrets bid-keys`: it prints the resolvedBidId
// key kept in Redis (unwrapped with the master key) in the form of
// ENDCAP_BID_SIGNING_KEYS, so that an installation can move to configured
// keys and rotate them (docs/reference/resolved-bid-id.md, Rotation).
//
// `endcap admin secrets wrap-plaintext` wraps with the master key the keys
// an earlier version left in Redis in plaintext, which the api refuses to
// start with (docs/operations/operations.md, Secrets).
func cmdSecrets(ctx context.Context, verb string, args []string) error {
	if verb != "bid-keys" && verb != "wrap-plaintext" {
		return fmt.Errorf("usage: endcap admin secrets bid-keys|wrap-plaintext [flags]; unknown %q", verb)
	}
	cfg, _, err := parse("admin secrets "+verb, args, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if verb == "wrap-plaintext" {
		wrapped, err := app.WrapPlaintextSecrets(ctx, cfg)
		for _, name := range wrapped {
			fmt.Println("wrapped", name)
		}
		if err == nil && len(wrapped) == 0 {
			fmt.Println("no plaintext key in Redis")
		}
		return err
	}
	spec, err := app.SharedBidKeys(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "The resolvedBidId signing key kept in Redis, as ENDCAP_BID_SIGNING_KEYS: keep it secret.")
	fmt.Println(spec)
	return nil
}

// cmdUser is `endcap admin user create|list|set-password`: console users.
// A marketplace's first administrator comes from here; vendor users come
// from invitations (docs/guide/console.md).
func cmdUser(ctx context.Context, verb string, args []string) error {
	var marketplace, email, passwordFile string
	cfg, _, err := parse("admin user "+verb, args, func(fs *flag.FlagSet) {
		switch verb {
		case "create":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
			fs.StringVar(&email, "email", "", "e-mail address, the sign-in name (required)")
			fs.StringVar(&passwordFile, "password-file", "", "file whose first line is the password (empty: a random one, printed once)")
		case "list":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id (required)")
		case "set-password":
			fs.StringVar(&marketplace, "marketplace", "", "marketplace id of the user (required when the address has accounts on several)")
			fs.StringVar(&email, "email", "", "e-mail address of the user (required)")
			fs.StringVar(&passwordFile, "password-file", "", "file whose first line is the password (empty: a random one, printed once)")
		}
	})
	if err != nil {
		return err
	}
	switch verb {
	case "create", "list", "set-password":
	default:
		return fmt.Errorf("usage: endcap admin user create|list|set-password; unknown %q", verb)
	}
	sess, err := openAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer sess.cancel()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return runUser(wctx, sess.acc, sess.users, os.Stdout, verb, marketplace, email, passwordFile)
}

// userOut is a user as the CLI prints it: never the password's hash.
type userOut struct {
	ID            string     `json:"id"`
	Email         string     `json:"email"`
	MarketplaceID string     `json:"marketplaceId"`
	Role          users.Role `json:"role"`
	VendorID      string     `json:"vendorId,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	Disabled      bool       `json:"disabled,omitempty"`
	Password      string     `json:"password,omitempty"` // a generated one, printed once
}

func outUser(u users.User) userOut {
	return userOut{ID: u.ID, Email: u.Email, MarketplaceID: u.MarketplaceID, Role: u.Role, VendorID: u.VendorID, CreatedAt: u.CreatedAt, Disabled: !u.Active()}
}

func runUser(ctx context.Context, acc *accounts.Service, us *users.Service, out io.Writer, verb, marketplace, email, passwordFile string) error {
	password, generated, err := readPassword(passwordFile)
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		if marketplace == "" || email == "" {
			return errors.New("--marketplace and --email are required")
		}
		if _, ok := acc.Marketplace(marketplace); !ok {
			return fmt.Errorf("marketplace %s not found", marketplace)
		}
		u, err := us.CreateAdmin(ctx, marketplace, email, password)
		if err != nil {
			return err
		}
		o := outUser(u)
		if generated {
			fmt.Fprintln(os.Stderr, "The password is shown only this once; store it now.")
			o.Password = password
		}
		return printJSON(out, o)
	case "set-password":
		if email == "" {
			return errors.New("--email is required")
		}
		var u users.User
		if marketplace != "" {
			var ok bool
			if u, ok = us.Lookup(marketplace, email); !ok {
				return fmt.Errorf("no user %s on marketplace %s", email, marketplace)
			}
		} else {
			switch accts := us.Accounts(email); len(accts) {
			case 0:
				return fmt.Errorf("no user %s", email)
			case 1:
				u = accts[0]
			default:
				mps := make([]string, len(accts))
				for i, a := range accts {
					mps[i] = a.MarketplaceID
				}
				return fmt.Errorf("%s has accounts on %d marketplaces (%s): give --marketplace", email, len(accts), strings.Join(mps, ", "))
			}
		}
		if u, err = us.SetPassword(ctx, u.ID, password); err != nil {
			return err
		}
		o := outUser(u)
		if generated {
			fmt.Fprintln(os.Stderr, "The password is shown only this once; store it now.")
			o.Password = password
		}
		return printJSON(out, o)
	default: // list
		if marketplace == "" {
			return errors.New("--marketplace is required")
		}
		list := us.List(marketplace)
		o := make([]userOut, len(list))
		for i, u := range list {
			o[i] = outUser(u)
		}
		return printJSON(out, o)
	}
}

// readPassword reads the first line of a file, or makes a random password.
func readPassword(file string) (string, bool, error) {
	if file == "" {
		return users.RandomToken()[:24], true, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), false, nil
}

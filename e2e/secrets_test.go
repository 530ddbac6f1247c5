package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestSecretsAtRest runs the api on a Redis of its own, without configured
// signing keys: an api without a master key refuses to start; an earlier
// version's plaintext keys (or planted ones) stop the start until `endcap
// admin secrets wrap-plaintext` wraps them, and then what they signed
// (resolvedBidIds, cursors) stays valid; a restart with the same master key
// finds the same keys; another master key, or an altered wrapped value,
// stops the start with a clear error and changes nothing in Redis; `endcap
// admin secrets bid-keys` gives the key back as ENDCAP_BID_SIGNING_KEYS.
func TestSecretsAtRest(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	rs := testenv.OwnRedis(t)
	cfg := env.Config(t, brokers)
	cfg.RedisAddr = rs.Addr
	cfg.BidSigningKeys, cfg.CursorSecret = "", ""

	if err := testapp.Fail(t, cfg, app.TargetAPI, time.Minute); !strings.Contains(err.Error(), "ENDCAP_SECRET_KEY_FILE") {
		t.Fatalf("api without a master key: %v", err)
	}

	ctx := context.Background()
	rdb := redisstore.Open(redisstore.Options{Addr: rs.Addr})
	defer rdb.Close()
	// What an earlier version left: both keys in plaintext, and a token and
	// a cursor signed with them.
	bidKey, curKey := []byte(strings.Repeat("b", 32)), []byte(strings.Repeat("c", 32))
	rdb.Set(ctx, "ec:bid-signing-key:1", hex.EncodeToString(bidKey), 0)
	rdb.Set(ctx, "ec:cursor-key", hex.EncodeToString(curKey), 0)
	oldRing, err := bidtoken.ParseKeyring("1:" + base64.RawURLEncoding.EncodeToString(bidKey))
	if err != nil {
		t.Fatal(err)
	}
	mp := uuid.New()
	token, err := oldRing.Encode(bidtoken.Claims{MarketplaceID: mp, AuctionID: uuid.Must(uuid.NewV7()), CampaignID: uuid.New(),
		AuctionTimeMs: time.Now().UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings, Rank: 1,
		PriceMicros: 250_000, WinnerType: bidtoken.WinnerProduct, WinnerID: "p-1", VendorID: "v-1"})
	if err != nil {
		t.Fatal(err)
	}
	cur := pagination.Cursor{List: "vendors", Marketplace: mp.String(), After: "v-9"}
	cursor := pagination.NewSigner(curKey).Encode(cur)

	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(masterkey.Generate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.SecretKeyFile = keyFile
	checkKeys := func(a *app.App) {
		t.Helper()
		if _, err := a.BidKeys.Load().Decode(token, mp); err != nil {
			t.Errorf("the earlier version's resolvedBidId: %v", err)
		}
		if got, err := a.Cursors.Decode(cursor, cur.List, cur.Marketplace, ""); err != nil || got != cur {
			t.Errorf("the earlier version's cursor: %+v %v", got, err)
		}
	}
	stored := func() (string, string) {
		return rdb.Get(ctx, "ec:bid-signing-key:1").Val(), rdb.Get(ctx, "ec:cursor-key").Val()
	}

	// Plaintext keys in Redis (an earlier version's, or planted by whoever
	// can write Redis) stop the start with what to do; nothing is rewritten.
	plainBid, plainCur := stored()
	if err := testapp.Fail(t, cfg, app.TargetAPI, time.Minute); !strings.Contains(err.Error(), "ec:bid-signing-key:1") ||
		!strings.Contains(err.Error(), "plaintext") || !strings.Contains(err.Error(), "endcap admin secrets wrap-plaintext") {
		t.Errorf("plaintext keys: %v", err)
	}
	if b, c := stored(); b != plainBid || c != plainCur {
		t.Fatal("a start refused for plaintext keys changed them")
	}
	// The operator adopts them deliberately: wrapped, what they signed
	// stays valid.
	if names, err := app.WrapPlaintextSecrets(ctx, cfg); err != nil || len(names) != 2 {
		t.Fatalf("WrapPlaintextSecrets: %v %v", names, err)
	}
	a := testapp.Start(t, testapp.WithConfig(cfg), testapp.Target(app.TargetAPI))
	checkKeys(a.App)
	a.Stop()
	wrappedBid, wrappedCur := stored()
	for _, v := range []string{wrappedBid, wrappedCur} {
		if !masterkey.Wrapped(v) || strings.Contains(v, hex.EncodeToString(bidKey)) || strings.Contains(v, hex.EncodeToString(curKey)) {
			t.Errorf("not rewritten wrapped: %q", v)
		}
	}

	// The same master key again: the same keys.
	a = testapp.Start(t, testapp.WithConfig(cfg), testapp.Target(app.TargetAPI))
	checkKeys(a.App)
	a.Stop()
	if spec, err := app.SharedBidKeys(ctx, cfg); err != nil || spec != "1:"+base64.RawURLEncoding.EncodeToString(bidKey) {
		t.Errorf("SharedBidKeys: %q %v", spec, err)
	}

	// Another master key: a clear error at start, nothing rewritten.
	other := cfg
	other.SecretKeyFile = ""
	other.SecretKey = masterkey.Generate()
	if err := testapp.Fail(t, other, app.TargetAPI, time.Minute); !strings.Contains(err.Error(), "ec:") || !strings.Contains(err.Error(), "cannot be unwrapped") {
		t.Errorf("another master key: %v", err)
	}
	if b, c := stored(); b != wrappedBid || c != wrappedCur {
		t.Error("a start with another master key changed the stored keys")
	}
	// An altered wrapped value: the same.
	altered := []byte(wrappedCur)
	altered[len(altered)-5] ^= 1
	rdb.Set(ctx, "ec:cursor-key", string(altered), 0)
	if err := testapp.Fail(t, cfg, app.TargetAPI, time.Minute); !strings.Contains(err.Error(), "ec:cursor-key") {
		t.Errorf("altered cursor key: %v", err)
	}
	if _, c := stored(); c != string(altered) {
		t.Error("the altered key was replaced")
	}
}

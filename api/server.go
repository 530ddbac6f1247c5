// Package api is the HTTP surface of Endcap (Gin): routing, authentication,
// request limits and error bodies. Handlers decode, call a domain package and
// encode; the rules live in the domain packages.
package api

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/endcap/endcap/api/openapi"
	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/management/accounts"
)

// Deps are what the HTTP layer calls into. Accounts and Events may be nil for
// a process that serves only health and metrics (projector, exporter).
type Deps struct {
	Accounts *accounts.Service
	Events   *ingest.Appender
	// Health answers /readyz (nil: always ready).
	Health       *Health
	MaxBodyBytes int64
	RetryAfter   time.Duration
	Log          *slog.Logger
	// Auctions runs auctions; AuctionRecorder takes their records (both
	// nil: the auction endpoints are not served).
	Auctions        Auctioneer
	AuctionRecorder auction.Recorder
	// ExplainMaxCandidates bounds the candidates POST /v2/auctions/explain
	// lists for one request (0: no limit).
	ExplainMaxCandidates int
	// VerifyBid checks a resolvedBidId for a marketplace (nil: unchecked).
	VerifyBid func(marketplaceID, token string) error
	// Public and PublicRoutes serve /public/v1 (advanced key).
	Public       *Public
	PublicRoutes []RouteSet
	Now          func() time.Time
	// MetricsElsewhere: /metrics is served on a listener of its own
	// (ENDCAP_METRICS_ADDR, see MetricsHandler), not by this handler.
	MetricsElsewhere bool
	// KeyUsage, when set, is told of every authenticated key's use (the
	// "last used" of the console).
	KeyUsage func(keyID string)
	// Console, when set, installs the web console under /console;
	// ConsoleNotFound answers the paths under /console that no route has.
	Console         func(g *gin.RouterGroup)
	ConsoleNotFound gin.HandlerFunc
	// MaxEventsInFlight and MaxAuctionsInFlight bound the /v2/events and
	// /v2/auctions requests (the explain and other auction routes included)
	// this process works on at once; past them a request is answered 503
	// with Retry-After at once (0: no bound).
	MaxEventsInFlight   int
	MaxAuctionsInFlight int
	// Foreground, when set, counts the /v2/events and auction requests in
	// flight (those admitted), for background work of the same process to
	// give way to them (the events fold; priority.Yield).
	Foreground *priority.Gate
	// TrustedProxies: the reverse proxies (IPs or CIDRs) whose
	// X-Forwarded-For or X-Real-IP names the client (gin.Context.ClientIP);
	// nil: none, the client is the connection's address.
	TrustedProxies []string
	// DocURLBase is the documentation's address: every error body's docUrl
	// is <DocURLBase>/reference/errors.md#<errCode> ("": DefaultDocURLBase). It is the
	// process's: a second New in one process replaces the first's.
	DocURLBase string
}

// New returns the HTTP handler of one process.
func New(d Deps) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	if d.Now == nil {
		d.Now = time.Now
	}
	r := gin.New()
	// The configuration checks the list; one gin refuses all the same
	// trusts no proxy.
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		d.Log.Error("trusted proxies refused: no proxy is trusted", "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	// Route on the escaped path and unescape parameters afterwards, so that
	// ids with a slash (product ids are "any format") work as %2F.
	r.UseRawPath = true
	r.UnescapePathValues = true
	base := strings.TrimRight(d.DocURLBase, "/")
	if base == "" {
		base = DefaultDocURLBase
	}
	docBase.Store(&base)
	r.Use(requestID, securityHeaders, recovery(d.Log), observe, pathText)
	if telemetry.Tracing() { // with traces off, no middleware at all
		r.Use(traceRequest)
	}
	r.NoRoute(func(c *gin.Context) {
		if d.ConsoleNotFound != nil && strings.HasPrefix(c.Request.URL.Path, "/console/") {
			d.ConsoleNotFound(c)
			return
		}
		abortV2(c, http.StatusNotFound, "resource_not_found", "no such endpoint: "+c.Request.Method+" "+c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		abortV2(c, http.StatusMethodNotAllowed, "method_not_allowed", "method "+c.Request.Method+" is not allowed on "+c.Request.URL.Path)
	})

	h := &handlers{d: d}
	r.GET("/livez", h.livez)
	r.GET("/readyz", h.readyz)
	r.GET("/openapi.json", serveOpenAPI)
	if !d.MetricsElsewhere {
		r.GET("/metrics", gin.WrapH(promhttp.Handler()))
	}

	if d.Accounts != nil && d.Events != nil {
		v2 := r.Group("/v2", cors)
		v2.OPTIONS("/events")
		v2.OPTIONS("/auctions")
		v2.OPTIONS("/auctions/sponsored-brand")
		v2.OPTIONS("/auctions/travel")
		mkey := requireKey(d.Accounts, accounts.KeyMarketplace, d.RetryAfter, d.KeyUsage, abortV2)
		events := []gin.HandlerFunc{newAdmission("events", d.MaxEventsInFlight).handler(&h.d)}
		auctions := []gin.HandlerFunc{newAdmission("auctions", d.MaxAuctionsInFlight).handler(&h.d)}
		if d.Foreground != nil {
			events, auctions = append(events, foreground(d.Foreground)), append(auctions, foreground(d.Foreground))
		}
		v2.POST("/events", append(slices.Clip(events), mkey, h.postEvents)...)
		if d.Auctions != nil {
			v2.POST("/auctions", append(slices.Clip(auctions), mkey, h.postAuctions(auction.Auctions))...)
			v2.POST("/auctions/sponsored-brand", append(slices.Clip(auctions), mkey, h.postAuctions(auction.SponsoredBrand))...)
			v2.POST("/auctions/travel", append(slices.Clip(auctions), mkey, h.postAuctions(auction.Travel))...)
		}
		if d.Auctions != nil {
			// Explain lists every advertiser's bids, campaigns and budget
			// state: not for the key a storefront ships to browsers. The
			// advanced key only, outside the /v2 group's CORS (a browser
			// page of another origin cannot call it), rate-limited per key,
			// and within the auctions' admission bound.
			explain := append(slices.Clip(auctions), requireKey(d.Accounts, accounts.KeyAdvanced, d.RetryAfter, d.KeyUsage, abortV2), vendorKeys(nil))
			if d.Public != nil && d.Public.Limits != nil {
				explain = append(explain, d.Public.Limits.Limit("explain"))
			}
			r.POST("/v2/auctions/explain", append(explain, h.postAuctionsExplain)...)
		}

		pubAbort := abortV2
		if d.Public != nil {
			pubAbort = d.Public.abort
		}
		pub := r.Group("/public/v1", requireKey(d.Accounts, accounts.KeyAdvanced, d.RetryAfter, d.KeyUsage, pubAbort), vendorKeys(d.Public))
		if d.Public != nil {
			pub.Use(d.Public.Writes())
		}
		pub.GET("/marketplace", h.getMarketplace)
		for _, rs := range d.PublicRoutes {
			rs(pub, d.Public)
		}
	}
	if d.Console != nil {
		d.Console(r.Group("/console"))
	}
	return normalizer{r}
}

// serveOpenAPI answers the description of the API (api/openapi), without a
// key: cacheable (revalidated with its ETag, 304 when unchanged) and
// readable from any origin.
func serveOpenAPI(c *gin.Context) {
	doc, err := openapi.JSON()
	if err != nil { // the document's tests make this unreachable
		abortV2(c, http.StatusInternalServerError, "internal_server_error", "the API description cannot be read: "+err.Error())
		return
	}
	h := c.Writer.Header()
	h.Set("ETag", doc.ETag)
	h.Set("Cache-Control", "public, no-cache")
	h.Set("Access-Control-Allow-Origin", "*")
	if etagMatches(c.GetHeader("If-None-Match"), doc.ETag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json", doc.JSON)
}

// etagMatches reports whether an If-None-Match value names etag: "*", or a
// comma-separated list of entity tags compared weakly (RFC 9110 13.1.2).
func etagMatches(ifNoneMatch, etag string) bool {
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// MetricsHandler serves /metrics alone (any other path is 404), with the
// headers of every answer of the API: for a listener of its own.
func MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		mux.ServeHTTP(w, r)
	})
}

type handlers struct{ d Deps }

func (h *handlers) livez(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

// readyz answers 200 only when every dependency answered its last check
// (run in the background every second, each bounded by a second): it never
// waits for a dependency itself.
func (h *handlers) readyz(c *gin.Context) {
	ready, results := true, map[string]string{}
	if h.d.Health != nil {
		ready, results = h.d.Health.Report(h.d.Now())
	}
	status, code := "ready", http.StatusOK
	if !ready {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	c.JSON(code, gin.H{"status": status, "checks": results})
}

func (h *handlers) getMarketplace(c *gin.Context) {
	m := principal(c).Marketplace
	c.JSON(http.StatusOK, gin.H{"id": m.ID, "name": m.Name, "currencyCode": m.Currency, "timezone": m.Timezone, "createdAt": timestamp.Of(m.CreatedAt)})
}

package console

import (
	"context"
	"errors"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// Limits of the console's requests: the size of a form's body, the
// downloads a user runs at once, the sign-in throttle's outcomes.

const (
	// maxFormBody bounds every form's body (a form is a few fields).
	maxFormBody = 64 << 10
	// maxExplainForm: the explain form carries an auction's JSON (up to
	// maxExplainBody, each byte up to three when form-encoded).
	maxExplainForm = 1 << 20
)

// formLimits are the forms that need more than maxFormBody, by route.
var formLimits = map[string]int64{"/console/explain": maxExplainForm}

// formLimit reads the body of a form (POST) before any handler does: an
// application/x-www-form-urlencoded body of at most the route's limit.
// Larger is 413, another type (multipart included) 415, both a page.
func (c *Console) formLimit(ctx *gin.Context) {
	if ctx.Request.Method == http.MethodGet || ctx.Request.Method == http.MethodHead {
		ctx.Next()
		return
	}
	limit := int64(maxFormBody)
	if l, ok := formLimits[ctx.FullPath()]; ok {
		limit = l
	}
	if ctx.Request.ContentLength > limit {
		c.errorPage(ctx, http.StatusRequestEntityTooLarge, "This form is larger than the console accepts ("+strconv.FormatInt(limit>>10, 10)+" KB).")
		return
	}
	if ct := ctx.GetHeader("Content-Type"); ct != "" || ctx.Request.ContentLength != 0 {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/x-www-form-urlencoded" {
			c.errorPage(ctx, http.StatusUnsupportedMediaType, "The console's forms are sent as application/x-www-form-urlencoded.")
			return
		}
	}
	ctx.Request.Body = http.MaxBytesReader(ctx.Writer, ctx.Request.Body, limit)
	if err := ctx.Request.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			c.errorPage(ctx, http.StatusRequestEntityTooLarge, "This form is larger than the console accepts ("+strconv.FormatInt(limit>>10, 10)+" KB).")
			return
		}
		c.errorPage(ctx, http.StatusBadRequest, "This form could not be read: reload the page and try again.")
		return
	}
	ctx.Next()
}

// waiter is an error that says how long to wait before trying again.
type waiter interface{ Wait() time.Duration }

// setRetryAfter sets Retry-After (whole seconds, rounded up) of an error
// that says how long to wait.
func setRetryAfter(ctx *gin.Context, err error) bool {
	var w waiter
	if !errors.As(err, &w) {
		return false
	}
	ctx.Header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(w.Wait().Seconds())))))
	return true
}

// recordAttempt tells the sign-in throttle the outcome of a password
// check it let through.
func (c *Console) recordAttempt(ctx context.Context, email, client string, err error) {
	if rerr := c.o.Throttle.Record(ctx, email, client, err); rerr != nil {
		c.o.Log.WarnContext(ctx, "console: a sign-in attempt was not counted", "client", client, "err", rerr)
	}
}

// download takes one of the viewer's download slots, or answers 429 (and
// returns false); release it when the download is over.
func (c *Console) download(ctx *gin.Context, v *viewer) (release func(), ok bool) {
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	defer cancel()
	release, err := c.o.Downloads.Take(rctx, v.User.ID)
	if err != nil {
		c.fail(ctx, err)
		return nil, false
	}
	return release, true
}

// starting answers a request with a session while the users are still
// being read (the process is starting): 503 with Retry-After and a page
// that reloads itself, and the session kept.
func (c *Console) starting(ctx *gin.Context) {
	ctx.Header("Retry-After", strconv.Itoa(startingRetry))
	ctx.Header("Cache-Control", "no-store")
	retry := 0
	if ctx.Request.Method == http.MethodGet {
		retry = startingRetry
	}
	ctx.Set("console.error", "The console is starting.")
	c.render(ctx, http.StatusServiceUnavailable, "starting", "Starting", startingData{Retry: retry})
	ctx.Abort()
}

// startingRetry: seconds before the starting page reloads.
const startingRetry = 2

type startingData struct{ Retry int }

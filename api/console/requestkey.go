package console

import (
	"context"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idempotency"
)

// requestKeyField is the hidden field of a form that creates something:
// the key the page was rendered with (newRequestKey), sent back with the
// form.
const requestKeyField = "requestKey"

// newRequestKey is a new form's request key: a UUIDv7, whose time is when
// the form was rendered.
func newRequestKey() string {
	u, err := uuid.NewV7()
	if err != nil {
		return ""
	}
	return u.String()
}

// keyedRequest is the context of a form submission that carries a request
// key: every submission of the same form with the same values (a double
// click, a reload that posts again) is the same request to the service
// (idempotency.WithRequest), so it creates the same resource once. The key
// is the user's: scoped by marketplace and user. A key that is not a
// UUIDv7 of the idempotency retention (a form older than a day, a forged
// one) is ignored: the submission is a request of its own.
func (c *Console) keyedRequest(ctx *gin.Context, form url.Values) context.Context {
	rctx := ctx.Request.Context()
	key := form.Get(requestKeyField)
	u, err := uuid.Parse(key)
	if err != nil || u.Version() != 7 || len(key) != 36 {
		return rctx
	}
	sec, nsec := u.Time().UnixTime()
	seed, now := time.Unix(sec, nsec), c.o.Now()
	if seed.Before(now.Add(-idempotency.Retention)) || seed.After(now.Add(time.Minute)) {
		return rctx
	}
	vals := url.Values{}
	for k, vs := range form {
		if k != requestKeyField && k != "csrf" {
			vals[k] = vs
		}
	}
	v := viewerOf(ctx)
	fp := idempotency.Fingerprint(ctx.Request.Method, ctx.Request.URL.Path, "", []byte(vals.Encode()))
	return idempotency.WithRequest(rctx, "console:"+v.Marketplace.ID+":"+v.User.ID, key, fp, seed)
}

package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
)

// readBody reads the whole request body, at most limit bytes. It answers 413
// itself and returns ok=false when the body is larger.
func readBody(c *gin.Context, limit int64) ([]byte, bool) { return readBodyInto(c, limit, nil) }

// readBodyInto is readBody appending to dst[:0] (a pooled buffer of a
// handler that keeps nothing of the body once it answered): sized from
// Content-Length when the client sent one, so that a body costs one
// allocation at most, and none when dst is large enough.
func readBodyInto(c *gin.Context, limit int64, dst []byte) ([]byte, bool) {
	n := c.Request.ContentLength
	if n > limit {
		abortV2(c, http.StatusRequestEntityTooLarge, "request_too_large", "request body larger than the limit of "+itoa(limit)+" bytes")
		return nil, false
	}
	// One byte more than announced, so that the read ending the body finds
	// room and sees EOF without growing the buffer.
	want := 512
	if n >= 0 {
		want = int(n) + 1
	}
	body := slices.Grow(dst[:0], want)
	r := http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	for {
		if len(body) == cap(body) {
			body = slices.Grow(body, len(body)) // doubles
		}
		k, err := r.Read(body[len(body):cap(body)])
		body = body[:len(body)+k]
		if err == io.EOF {
			return body, true
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				abortV2(c, http.StatusRequestEntityTooLarge, "request_too_large", "request body larger than the limit of "+itoa(limit)+" bytes")
				return nil, false
			}
			abortV2(c, http.StatusBadRequest, "bad_request", "could not read the request body: "+err.Error())
			return nil, false
		}
	}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

type acceptedCounts struct {
	Impressions int `json:"impressions"`
	Clicks      int `json:"clicks"`
	Purchases   int `json:"purchases"`
	PageViews   int `json:"pageviews"`
}

// postEvents is POST /v2/events: validate the whole request, append every
// event to Kafka, and answer 200 only once Kafka acknowledged all of them.
func (h *handlers) postEvents(c *gin.Context) {
	p := principal(c)
	body, ok := readBody(c, h.d.MaxBodyBytes)
	if !ok {
		return
	}
	events, verr := ingest.ParseRequest(body, p.Marketplace.ID, h.d.Now().UnixMilli())
	if verr != nil {
		telemetry.EventsRejected.WithLabelValues(verr.Code).Inc()
		abortV2(c, http.StatusBadRequest, verr.Code, verr.Message)
		return
	}
	if h.d.VerifyBid != nil {
		verr, err := ingest.VerifyResolvedBids(events, func(tok string) error { return h.d.VerifyBid(p.Marketplace.ID, tok) })
		if err != nil {
			abortUnavailable(c, h.d.RetryAfter, "resolvedBidIds cannot be verified right now; retry the same request later")
			return
		}
		if verr != nil {
			telemetry.EventsRejected.WithLabelValues(verr.Code).Inc()
			abortV2(c, http.StatusBadRequest, verr.Code, verr.Message)
			return
		}
	}
	// Once validated, the append runs to its own deadline even if the
	// client goes away, so that a request is never half-produced by our
	// choice; the client's retry is deduplicated by event id.
	ctx := context.WithoutCancel(c.Request.Context())
	if err := h.d.Events.Append(ctx, events); err != nil {
		h.d.Log.WarnContext(c, "events not acknowledged by Kafka", "marketplace", p.Marketplace.ID, "events", len(events), "err", err)
		abortUnavailable(c, h.d.RetryAfter, "the events could not be stored right now; retry the same request later")
		return
	}
	var n acceptedCounts
	for i := range events {
		switch events[i].Kind {
		case records.KindImpression:
			n.Impressions++
		case records.KindClick:
			n.Clicks++
		case records.KindPurchase:
			n.Purchases++
		case records.KindPageView:
			n.PageViews++
		}
	}
	c.JSON(http.StatusOK, gin.H{"accepted": n})
}

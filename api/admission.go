package api

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/telemetry"
)

// admission bounds the requests of one kind (events, auctions) a process
// works on at once. A request that finds the bound reached is answered 503
// with Retry-After at once, before its body is read: the requests already
// accepted keep their latency instead of sharing the cores with a queue, and
// the memory their bodies take stays within the bound times the largest body
// (docs/operations/operations.md, Admission).
type admission struct {
	slots chan struct{}
	kind  string
	msg   string
}

// newAdmission returns a bound of limit requests in flight (nil, no bound,
// when limit is 0).
func newAdmission(kind string, limit int) *admission {
	if limit <= 0 {
		return nil
	}
	return &admission{slots: make(chan struct{}, limit), kind: kind,
		msg: "the server is at its limit of " + strconv.Itoa(limit) + " " + kind + " requests in flight and sheds this one unread (nothing of it was stored); retry after the Retry-After delay"}
}

// handler admits a request or sheds it (nil a: admits every request).
func (a *admission) handler(d *Deps) gin.HandlerFunc {
	return func(c *gin.Context) {
		if a == nil {
			return
		}
		select {
		case a.slots <- struct{}{}:
		default:
			telemetry.AdmissionShed.WithLabelValues(a.kind).Inc()
			abortUnavailable(c, d.RetryAfter, a.msg)
			return
		}
		defer func() { <-a.slots }()
		c.Next()
	}
}

// inFlight is how many requests hold a slot.
func (a *admission) inFlight() int {
	if a == nil {
		return 0
	}
	return len(a.slots)
}

// foreground counts the request in flight at g while the handlers after it
// run: the events fold of the same process gives way to it
// (priority.Yield; docs/design/projector.md, Sharing the cores with the API).
func foreground(g *priority.Gate) gin.HandlerFunc {
	return func(c *gin.Context) {
		g.Enter()
		defer g.Leave()
		c.Next()
	}
}

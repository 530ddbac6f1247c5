package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

var (
	bareAnswer         = []byte(`{"accepted":true}`)
	bareAuctionsAnswer = []byte(`{"results":[{"resultType":"listings","winners":[],"error":false}]}`)
)

// BareHandler is the comparison baseline: a Gin engine (gin.New(), release mode, no middleware) with two
// handlers that read the whole body and answer a constant: POST /v2/events 200 {"accepted":true}, and
// POST /v2/auctions 201 with one empty listings result. It parses nothing and stores nothing, so a run
// against it measures the HTTP + JSON-body floor of the machine (load generator included); the ratio of the
// real service's throughput to it shows what the service's own work costs.
//
// It sets Gin's global mode to release.
func BareHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.POST(eventsPath, func(c *gin.Context) {
		if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
			c.Data(http.StatusBadRequest, "application/json", []byte(`{"errCode":"bad_request"}`))
			return
		}
		c.Data(http.StatusOK, "application/json", bareAnswer)
	})
	e.POST(auctionsPath, func(c *gin.Context) {
		if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
			c.Data(http.StatusBadRequest, "application/json", []byte(`{"errCode":"bad_request"}`))
			return
		}
		c.Data(http.StatusCreated, "application/json", bareAuctionsAnswer)
	})
	return e
}

// ServeBare serves BareHandler on addr (e.g. "127.0.0.1:8099") until ctx is done, then shuts down
// gracefully (at most 5 s). It returns nil after a shutdown caused by ctx, or the listen/serve error.
func ServeBare(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return serveBare(ctx, ln)
}

func serveBare(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           BareHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

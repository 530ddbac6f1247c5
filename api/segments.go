package api

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/segments"
)

// SegmentRoutes serves /public/v1/segment-service (docs/reference/segments.md).
func SegmentRoutes(svc *segments.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &segmentHandlers{svc: svc, p: p}
		r := g.Group("/segment-service/segments", p.Limit("default"))
		r.GET("", h.list)
		r.GET("/:id", h.get)
		r.PUT("/:id", h.put)
		r.DELETE("/:id", h.delete)
		r.POST("/:id/upload", h.upload)
		// The upload is streamed (and idempotent by nature: the same file
		// again gives the same members).
		p.withoutIdempotencyKey(r.BasePath() + "/:id/upload")
	}
}

const (
	segmentListDefault = 1000
	segmentListMax     = 1000
	// segmentEnvelopeBytes is what the multipart envelope (boundaries, part
	// headers, other small fields) may add to the file's maximum size.
	segmentEnvelopeBytes = 1 << 20
	// segmentIdleTimeout bounds the wait for the next bytes of an upload
	// (the server's ReadTimeout would otherwise cut a long upload), and the
	// write of the answer after it.
	segmentIdleTimeout = 30 * time.Second
)

type segmentHandlers struct {
	svc *segments.Service
	p   *Public
}

type segmentConfigJSON struct {
	Type string `json:"type"`
}

type segmentJSON struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	ID          string            `json:"id"`
	Total       int64             `json:"total"`
	Config      segmentConfigJSON `json:"config"`
}

type segmentListJSON struct {
	HasMore  bool          `json:"hasMore"`
	Segments []segmentJSON `json:"segments"`
	NextPage *string       `json:"nextPage"`
}

type segmentPutJSON struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Config      *struct {
		Type *string `json:"type"`
	} `json:"config"`
}

func toSegmentJSON(s segments.Segment) segmentJSON {
	return segmentJSON{Name: s.Name, Description: s.Description, ID: s.ID, Total: s.Total, Config: segmentConfigJSON{Type: s.Config.Type}}
}

func (h *segmentHandlers) fail(c *gin.Context, err error) { h.p.Fail(c, err) }

func (h *segmentHandlers) list(c *gin.Context) {
	after, limit, ok := h.p.PageQuery(c, "segments", "", segmentListDefault, segmentListMax)
	if !ok {
		return
	}
	mp := Marketplace(c).ID
	segs, more, err := h.svc.List(c.Request.Context(), mp, after, limit)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := segmentListJSON{HasMore: more, Segments: make([]segmentJSON, len(segs))}
	for i, s := range segs {
		out.Segments[i] = toSegmentJSON(s)
	}
	if len(segs) > 0 {
		out.NextPage = h.p.NextPage(c, "segments", "", segs[len(segs)-1].ID, more)
	}
	c.JSON(http.StatusOK, out)
}

func (h *segmentHandlers) get(c *gin.Context) {
	s, err := h.svc.Get(c.Request.Context(), Marketplace(c).ID, c.Param("id"))
	if err != nil {
		h.fail(c, err)
		return
	}
	setETag(c, s.Version)
	c.JSON(http.StatusOK, toSegmentJSON(s))
}

func (h *segmentHandlers) put(c *gin.Context) {
	ifMatch := ifMatch(c)
	var body segmentPutJSON
	if !h.p.BindJSON(c, &body) {
		return
	}
	in := segments.Input{Name: body.Name, Description: body.Description}
	if body.Config != nil {
		in.Config = &segments.ConfigInput{Type: body.Config.Type}
	}
	s, created, err := h.svc.Put(c.Request.Context(), Marketplace(c).ID, c.Param("id"), in, ifMatch)
	if err != nil {
		h.fail(c, err)
		return
	}
	setETag(c, s.Version)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, toSegmentJSON(s))
}

func (h *segmentHandlers) delete(c *gin.Context) {
	ifMatch := ifMatch(c)
	if err := h.svc.Delete(c.Request.Context(), Marketplace(c).ID, c.Param("id"), ifMatch); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// upload streams the `file` part of a multipart body into the segment: the
// body is never buffered whole (no ParseMultipartForm).
func (h *segmentHandlers) upload(c *gin.Context) {
	id := c.Param("id")
	var errs validation.Errors
	if v, ok := validation.As(segments.ValidateID(id)); ok {
		errs = append(errs, v...)
	}
	action, err := segments.ParseAction(c.Query("action"))
	if v, ok := validation.As(err); ok {
		errs = append(errs, v...)
	}
	if len(errs) > 0 {
		abort422(c, errs)
		return
	}
	ifMatch := ifMatch(c)
	maxFile := h.svc.MaxFileBytes()
	limit := maxFile + segmentEnvelopeBytes
	if c.Request.ContentLength > limit {
		h.tooLarge(c, maxFile)
		return
	}
	rc := http.NewResponseController(c.Writer)
	c.Request.Body = &segmentDeadlineReader{r: http.MaxBytesReader(c.Writer, c.Request.Body, limit), rc: rc}
	// The server's WriteTimeout runs from the end of the headers: give the
	// answer its own time after a long upload.
	answer := func() { _ = rc.SetWriteDeadline(time.Now().Add(segmentIdleTimeout)) }
	mr, err := c.Request.MultipartReader()
	if err != nil {
		abort422(c, validation.New(validation.TypeError, "Input should be a multipart/form-data body with a `file` part", "body"))
		return
	}
	var part io.Reader
	for part == nil {
		p, err := mr.NextPart()
		if err == io.EOF {
			abort422(c, validation.New(validation.Missing, "Field required", "body", "file"))
			return
		}
		if err != nil {
			answer()
			h.uploadFailed(c, maxFile, err, true)
			return
		}
		if p.FormName() == "file" {
			part = p
		}
	}
	version, err := h.svc.Upload(c.Request.Context(), Marketplace(c).ID, id, action, part, ifMatch)
	answer()
	if err != nil {
		h.uploadFailed(c, maxFile, err, false)
		return
	}
	setETag(c, version)
	c.Status(http.StatusNoContent)
}

func (h *segmentHandlers) tooLarge(c *gin.Context, maxFile int64) {
	abortV2(c, http.StatusRequestEntityTooLarge, "request_too_large", "the segment file is larger than the limit of "+itoa(maxFile)+" bytes (the limit applies to the file as sent and, for a gzip file, to its decompressed content)")
}

// uploadFailed answers a failed upload: the body could not be read (413
// above the limit, else 400: the client went away or the multipart body is
// truncated), or the service's answer.
func (h *segmentHandlers) uploadFailed(c *gin.Context, maxFile int64, err error, reading bool) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, segments.ErrFileTooLarge), errors.As(err, &tooBig):
		h.tooLarge(c, maxFile)
	case reading, errors.Is(err, segments.ErrRead):
		abortV2(c, http.StatusBadRequest, "bad_request", "could not read the multipart body to its end: "+err.Error())
	default:
		h.fail(c, err)
	}
}

// segmentDeadlineReader pushes the connection's read deadline forward while
// upload bytes keep coming, so that a long upload is not cut by the server's
// ReadTimeout while a stalled one still times out.
type segmentDeadlineReader struct {
	r    io.ReadCloser
	rc   *http.ResponseController
	last time.Time
}

func (d *segmentDeadlineReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.last = now
		_ = d.rc.SetReadDeadline(now.Add(segmentIdleTimeout))
	}
	return d.r.Read(p)
}

func (d *segmentDeadlineReader) Close() error { return d.r.Close() }

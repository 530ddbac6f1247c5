package api

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/reporting/exports"
)

// Exports (docs/reference/exports.md). Every error of these routes, validation
// included, has the exports shape {error: {code, message, details}}.
//
//	POST /export-service/exports              202 the pending export
//	GET  /export-service/exports              200 a page of the exports, newest first (filters: status, dataset, created_from, created_to)
//	GET  /export-service/exports/{exportId}   200 the export, with a presigned URL once completed
//	GET  /export-service/datasets             200 the datasets, their dimensions, metrics and granularities

// exportError is the body of every export error.
type exportError struct {
	Error exportErrorBody `json:"error"`
}

type exportErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Details []exports.Problem `json:"details"`
}

func abortExport(c *gin.Context, status int, code, msg string, details []exports.Problem) {
	if details == nil {
		details = []exports.Problem{}
	}
	c.AbortWithStatusJSON(status, exportError{Error: exportErrorBody{Code: code, Message: msg, Details: details}})
}

// abortInvalidExport answers 422 with every problem; the first one gives
// the code and the message.
func abortInvalidExport(c *gin.Context, probs []exports.Problem) {
	msg := probs[0].Message
	if len(probs) > 1 {
		msg += " (" + strconv.Itoa(len(probs)-1) + " more in details)"
	}
	abortExport(c, http.StatusUnprocessableEntity, probs[0].Code, msg, probs)
}

// ExportRoutes returns the exports route set.
func ExportRoutes(svc *exports.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &exportHandlers{svc: svc, p: p}
		p.setErrorStyle(g.BasePath()+"/export-service/", errorStyle{
			abort: func(c *gin.Context, status int, code, msg string) { abortExport(c, status, code, msg, nil) },
			invalidHeader: func(c *gin.Context, header, _, msg string) {
				abortExport(c, http.StatusUnprocessableEntity, exports.CodeInvalidRequest, msg,
					[]exports.Problem{{Code: exports.CodeInvalidRequest, Field: header, Message: msg}})
			},
		})
		g.POST("/export-service/exports", p.Limit("default"), h.create)
		g.GET("/export-service/exports", p.Limit("default"), h.list)
		g.GET("/export-service/exports/:exportId", p.Limit("default"), h.get)
		g.GET("/export-service/datasets", p.Limit("default"), h.datasets)
	}
}

type exportHandlers struct {
	svc *exports.Service
	p   *Public
}

func (h *exportHandlers) create(c *gin.Context) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, h.p.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			abortExport(c, http.StatusRequestEntityTooLarge, exports.CodeInvalidRequest, "The body is larger than "+strconv.FormatInt(h.p.MaxBodyBytes, 10)+" bytes.", nil)
			return
		}
		abortExport(c, http.StatusBadRequest, exports.CodeInvalidRequest, "The body could not be read.", nil)
		return
	}
	req, probs := exports.DecodeRequest(body)
	if len(probs) > 0 {
		abortInvalidExport(c, probs)
		return
	}
	mp := Marketplace(c)
	e, err := h.svc.Create(c.Request.Context(), mp.ID, req)
	var inv *exports.InvalidError
	switch {
	case err == nil:
		c.JSON(http.StatusAccepted, gin.H{"exportId": e.ID, "status": e.Status, "dataset": e.Dataset, "createdAt": timestamp.Of(e.CreatedAt)})
	case errors.As(err, &inv):
		abortInvalidExport(c, inv.Problems)
	case errors.Is(err, exports.ErrQuota):
		reset := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		c.Header("Retry-After", strconv.Itoa(int(time.Until(reset).Seconds())+1))
		abortExport(c, http.StatusTooManyRequests, exports.CodeQuotaExceeded,
			"This marketplace has requested its "+strconv.Itoa(h.svc.DailyQuota())+" exports of the day (UTC); the quota resets at "+timestamp.Format(reset)+".", nil)
	case errors.Is(err, exports.ErrUnavailable):
		h.p.Log.ErrorContext(c, "exports: export not accepted", "marketplace", mp.ID, "err", err)
		setRetryAfter(c, h.p.RetryAfter)
		msg := "The export could not be accepted right now; nothing was queued. Retry later."
		if writeDeadlinePassed(c) || errors.Is(err, exports.ErrUnconfirmed) {
			msg = "The export was not confirmed in time: it may or may not have been accepted. Retry the request with the same Idempotency-Key to get it (without one, a retry may create a second export)."
		}
		abortExport(c, http.StatusServiceUnavailable, exports.CodeUnavailable, msg, nil)
	default:
		h.p.Log.ErrorContext(c, "exports: create failed", "marketplace", mp.ID, "err", err)
		abortExport(c, http.StatusInternalServerError, exports.CodeInternal, "Internal error.", nil)
	}
}

// exportList is the body of the list.
type exportList struct {
	HasMore  bool           `json:"hasMore"`
	Exports  []exports.View `json:"exports"`
	NextPage *string        `json:"nextPage"`
}

func (h *exportHandlers) list(c *gin.Context) {
	mp := Marketplace(c)
	q, probs := exports.ParseListQuery(c.Request.URL.Query(), mp.ID, h.p.Cursors)
	if len(probs) > 0 {
		abortInvalidExport(c, probs)
		return
	}
	page, err := h.svc.List(c.Request.Context(), mp.ID, q)
	if err != nil {
		h.p.Log.ErrorContext(c, "exports: list failed", "marketplace", mp.ID, "err", err)
		abortExport(c, http.StatusInternalServerError, exports.CodeInternal, "Internal error.", nil)
		return
	}
	body := exportList{HasMore: page.HasMore, Exports: page.Exports}
	if page.HasMore {
		next := q.NextPage(h.p.Cursors, mp.ID, page.Last)
		body.NextPage = &next
	}
	c.JSON(http.StatusOK, body)
}

func (h *exportHandlers) get(c *gin.Context) {
	id := c.Param("exportId")
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		abortExport(c, http.StatusNotFound, exports.CodeNotFound, "No export "+strconv.Quote(id)+" in this marketplace.", nil)
		return
	}
	id = u.String() // ids are kept in lower case: an upper-case one names the same export
	mp := Marketplace(c)
	v, err := h.svc.Get(c.Request.Context(), mp.ID, id)
	switch {
	case err == nil:
		c.JSON(http.StatusOK, v)
	case errors.Is(err, exports.ErrNotFound):
		abortExport(c, http.StatusNotFound, exports.CodeNotFound, "No export "+strconv.Quote(id)+" in this marketplace.", nil)
	default:
		h.p.Log.ErrorContext(c, "exports: get failed", "marketplace", mp.ID, "export", id, "err", err)
		abortExport(c, http.StatusInternalServerError, exports.CodeInternal, "Internal error.", nil)
	}
}

type datasetDoc struct {
	Name          string      `json:"name"`
	Description   string      `json:"description"`
	Granularities []string    `json:"granularities"`
	Dimensions    []columnDoc `json:"dimensions"`
	Metrics       []columnDoc `json:"metrics"`
}

type columnDoc struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

func (h *exportHandlers) datasets(c *gin.Context) {
	var out []datasetDoc
	for _, d := range exports.Datasets() {
		doc := datasetDoc{Name: d.Name, Description: d.Description, Granularities: d.Granularities}
		for _, x := range d.Dimensions {
			doc.Dimensions = append(doc.Dimensions, columnDoc{x.Name, x.Kind.String(), x.Description})
		}
		for _, x := range d.Metrics {
			doc.Metrics = append(doc.Metrics, columnDoc{x.Name, x.Kind.String(), x.Description})
		}
		out = append(out, doc)
	}
	c.JSON(http.StatusOK, gin.H{"datasets": out})
}

package console

import (
	"context"
	"errors"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/scoredfiles"
)

// Exports and report files: an admin requests exports of the marketplace
// and downloads any export and any day's scored-attribution file; a vendor
// user requests exports of its own vendor (the export worker writes only
// that vendor's rows) and downloads those, and the rows of each day's
// scored-attribution file credited to its vendor. Every download is
// streamed by the console after the session's role and vendor are checked:
// no URL that works without the session is handed out.

const (
	// downloadTimeout bounds a whole download; idleWrite, each write to
	// the browser (the server's write timeout is moved forward while a
	// download makes progress).
	downloadTimeout = time.Hour
	idleWrite       = time.Minute
	// refreshSeconds: how often the list is read again while an export is
	// pending or running.
	refreshSeconds = 3
)

// DownloadHold is the longest a download holds one of its user's slots (a
// process that stops mid-download gives none back).
const DownloadHold = downloadTimeout + idleWrite

// scopeOf is the vendor whose files the viewer reads: its own for a vendor
// user, "" (every file of the marketplace) for an admin.
func scopeOf(v *viewer) string {
	if v.User.Role.IsVendor() {
		return v.User.VendorID
	}
	return ""
}

// --- exports ---

// exportForm is the request form's values.
type exportForm struct {
	Dataset, Granularity, StartDate, EndDate, Format string
	Dimensions, Metrics                              map[string]bool
}

type exportFilter struct {
	Status, Dataset, From, To string
}

type exportsData struct {
	Vendor     string // the vendor user's vendor ("" for an admin)
	RequestKey string // the request form's key (newRequestKey)
	Datasets   []*exports.Dataset
	// Dataset is the request form's: its granularities and columns are
	// the form's choices (another dataset's form is a link away).
	Dataset     *exports.Dataset
	Form        exportForm
	Filter      exportFilter
	Exports     []exports.View
	Statuses    []string
	Next        template.URL // the next page ("": none)
	Busy        bool         // some listed export is pending or running
	Refresh     int
	Quota       int
	ListProblem string
}

// exportColumns are the columns a dataset's request form starts with
// checked (a dataset not named here: its first dimension and metric).
var exportColumns = map[string]struct{ dimensions, metrics []string }{
	exports.DatasetMonitoringMetrics: {[]string{"day_local", "campaign_id"}, []string{"impressions", "clicks", "ad_spend", "total_purchase_amount"}},
	exports.DatasetBalanceLedger:     {[]string{"occurred_at", "vendor_id", "kind", "campaign_id"}, []string{"amount"}},
}

// defaultExportForm is the request form of the dataset called name (an
// unknown name: the first dataset's) as a page first shows it: the last
// seven local days, CSV, the dataset's usual columns.
func (c *Console) defaultExportForm(ctx *gin.Context, name string) exportForm {
	ds, ok := exports.DatasetByName(name)
	if !ok {
		ds = exports.Datasets()[0]
	}
	cols, ok := exportColumns[ds.Name]
	if !ok {
		cols.dimensions, cols.metrics = []string{ds.Dimensions[0].Name}, []string{ds.Metrics[0].Name}
	}
	today := c.o.Now().In(viewerOf(ctx).Marketplace.Location())
	end := time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC)
	return exportForm{Dataset: ds.Name, Granularity: ds.Granularities[0], Format: exports.FormatCSV,
		StartDate: end.AddDate(0, 0, -6).Format(time.DateOnly), EndDate: end.Format(time.DateOnly),
		Dimensions: set(cols.dimensions), Metrics: set(cols.metrics)}
}

// exportsData reads the list that the query asks for. A filter that is
// not valid is said on the page (ListProblem) and lists nothing.
func (c *Console) exportsData(ctx *gin.Context, form exportForm) exportsData {
	v := viewerOf(ctx)
	vendor := scopeOf(v)
	d := exportsData{Vendor: vendor, RequestKey: newRequestKey(), Datasets: exports.Datasets(), Form: form, Refresh: refreshSeconds,
		Statuses: []string{string(exports.StatusPending), string(exports.StatusRunning), string(exports.StatusCompleted), string(exports.StatusFailed)}}
	var ok bool
	if d.Dataset, ok = exports.DatasetByName(form.Dataset); !ok {
		d.Dataset = d.Datasets[0] // a form sent with no known dataset is shown again with the first's columns
	}
	d.Quota = c.o.Exports.DailyQuota()
	if vendor != "" {
		d.Quota = c.o.Exports.VendorDailyQuota()
	}
	d.Filter = exportFilter{Status: trimTo(ctx.Query("status"), 20), Dataset: trimTo(ctx.Query("dataset"), 50), From: trimTo(ctx.Query("from"), 10), To: trimTo(ctx.Query("to"), 10)}
	// The filter's days are the marketplace's local days; the list takes
	// instants: from the first day's start to the last day's end.
	// limit is not on the page (the list's default, 50, is); a link may
	// carry it.
	q := url.Values{"status": {d.Filter.Status}, "dataset": {d.Filter.Dataset}, "next_page": {ctx.Query("next_page")}, "limit": {ctx.Query("limit")}}
	loc := v.Marketplace.Location()
	var bad []string
	for _, b := range []struct {
		param, value, what string
		days               int
	}{{"created_from", d.Filter.From, "the first day", 0}, {"created_to", d.Filter.To, "the last day", 1}} {
		if b.value == "" {
			continue
		}
		day, ok := scoredfiles.DayOf(b.value)
		if !ok {
			bad = append(bad, b.what+" must be a date (YYYY-MM-DD)")
			continue
		}
		q.Set(b.param, time.Date(day.Year(), day.Month(), day.Day()+b.days, 0, 0, 0, 0, loc).Format(time.RFC3339))
	}
	if len(bad) > 0 {
		d.ListProblem = sentence(strings.Join(bad, "; "))
		return d
	}
	lq, probs := exports.ParseVendorListQuery(q, v.Marketplace.ID, vendor, c.cursors)
	if len(probs) > 0 {
		d.ListProblem = problemsText(probs)
		return d
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
	defer cancel()
	page, err := c.o.Exports.List(rctx, v.Marketplace.ID, lq)
	if err != nil {
		c.o.Log.ErrorContext(ctx, "console: exports list", "err", err)
		d.ListProblem = "The exports cannot be listed right now; reload the page."
		return d
	}
	d.Exports = page.Exports
	for _, e := range page.Exports {
		d.Busy = d.Busy || !e.Status.Terminal()
	}
	if page.HasMore {
		next := url.Values{"next_page": {lq.NextPage(c.cursors, v.Marketplace.ID, page.Last)}}
		for k, val := range map[string]string{"status": d.Filter.Status, "dataset": d.Filter.Dataset, "from": d.Filter.From, "to": d.Filter.To, "limit": ctx.Query("limit")} {
			if val != "" {
				next.Set(k, val)
			}
		}
		d.Next = template.URL("/console/exports?" + next.Encode()) // #nosec: built from url.Values
	}
	return d
}

// exportsPage shows the request form of the dataset that ?request= names
// (the first dataset's by default) and the list of exports.
func (c *Console) exportsPage(ctx *gin.Context) {
	d := c.exportsData(ctx, c.defaultExportForm(ctx, ctx.Query("request")))
	status := http.StatusOK
	if d.ListProblem != "" {
		status = http.StatusUnprocessableEntity
		ctx.Set("console.error", d.ListProblem)
	}
	c.render(ctx, status, "exports", "Exports", d)
}

// createExport requests an export: the marketplace's for an admin, its
// vendor's for a vendor user. The rules are the export service's (the
// same as POST /public/v1/export-service/exports). The form's request key
// makes a second submission of it (a double click, a reload after a lost
// answer) the same export, counted once against the quota.
func (c *Console) createExport(ctx *gin.Context) {
	v := viewerOf(ctx)
	if err := ctx.Request.ParseForm(); err != nil {
		c.formError(ctx, errkind.New(errkind.Invalid, "the form could not be read"), func() { c.exportsPage(ctx) })
		return
	}
	pf := ctx.Request.PostForm
	req := exports.Request{Dataset: pf.Get("dataset"), Granularity: pf.Get("granularity"), StartDate: strings.TrimSpace(pf.Get("startDate")),
		EndDate: strings.TrimSpace(pf.Get("endDate")), Format: pf.Get("format"), Dimensions: pf["dimensions"], Metrics: pf["metrics"]}
	form := exportForm{Dataset: req.Dataset, Granularity: req.Granularity, StartDate: req.StartDate, EndDate: req.EndDate, Format: req.Format,
		Dimensions: set(req.Dimensions), Metrics: set(req.Metrics)}
	again := func() { c.render(ctx, ctx.Writer.Status(), "exports", "Exports", c.exportsData(ctx, form)) }
	rctx, cancel := context.WithTimeout(c.keyedRequest(ctx, pf), 10*time.Second)
	defer cancel()
	var err error
	if vendor := scopeOf(v); vendor != "" {
		_, err = c.o.Exports.CreateForVendor(rctx, v.Marketplace.ID, vendor, req)
	} else {
		_, err = c.o.Exports.Create(rctx, v.Marketplace.ID, req)
	}
	var inv *exports.InvalidError
	switch {
	case errors.As(err, &inv):
		err = errkind.New(errkind.Invalid, problemsText(inv.Problems))
	case errors.Is(err, exports.ErrUnconfirmed):
		// A double click's second submission while the first is being
		// written, or an answer that came too late: the form's key makes
		// submitting it again the same export.
		err = errkind.New(errkind.Unavailable, "the export was not confirmed in time; submit the form again to see it (it will not make a second export)")
	}
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/exports?done=export")
}

// downloadExport streams a completed export's file. A vendor user reads
// only its vendor's exports: any other id is not found.
func (c *Console) downloadExport(ctx *gin.Context) {
	v := viewerOf(ctx)
	id := ctx.Param("id")
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 || (v.User.Role.IsVendor() && v.User.VendorID == "") {
		c.notFound(ctx, "The export")
		return
	}
	release, ok := c.download(ctx, v)
	if !ok {
		return
	}
	defer release()
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), downloadTimeout)
	defer cancel()
	f, err := c.o.Exports.Open(rctx, v.Marketplace.ID, scopeOf(v), u.String())
	if err != nil {
		if errors.Is(err, exports.ErrNotFound) {
			c.notFound(ctx, "The export")
			return
		}
		c.fail(ctx, err)
		return
	}
	defer f.Body.Close()
	c.attachment(ctx, f.ContentType, f.Name, f.Size)
	if _, err := io.Copy(c.streamWriter(ctx), f.Body); err != nil {
		c.o.Log.WarnContext(ctx, "console: export download cut short", "export", f.Export.ID, "err", err)
		abortStream(ctx)
	}
}

// --- scored-attribution files ---

// filesDays is how many local days the files page lists.
const filesDays = 14

type filesData struct {
	Vendor string
	Days   []dayFile
}

type dayFile struct {
	Day    string
	File   *scoredfiles.Stored
	Path   string // the download's path
	Vendor bool   // the download holds the viewer's vendor's rows only
}

// filesPage lists the last days' files with a download link each: the
// whole file for an admin, its vendor's rows for a vendor user.
func (c *Console) filesPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	m := v.Marketplace
	today := c.o.Now().In(m.Location())
	d := filesData{Vendor: scopeOf(v)}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 10*time.Second)
	defer cancel()
	for i := 1; i <= filesDays; i++ {
		day := time.Date(today.Year(), today.Month(), today.Day()-i, 0, 0, 0, 0, time.UTC)
		st, ok, err := c.o.ScoredFiles.Stored(rctx, m.ID, day)
		if err != nil {
			c.fail(ctx, err)
			return
		}
		df := dayFile{Day: day.Format(time.DateOnly), Vendor: d.Vendor != ""}
		if ok {
			df.File, df.Path = &st, "/console/files/"+df.Day+"/download"
		}
		d.Days = append(d.Days, df)
	}
	c.render(ctx, http.StatusOK, "files", "Scored-attribution files", d)
}

// downloadFile streams a day's file: the stored object to an admin, a
// Parquet file of the rows credited to its vendor to a vendor user.
func (c *Console) downloadFile(ctx *gin.Context) {
	v := viewerOf(ctx)
	day, ok := scoredfiles.DayOf(ctx.Param("day"))
	if !ok || (v.User.Role.IsVendor() && v.User.VendorID == "") {
		c.notFound(ctx, "The file")
		return
	}
	release, ok := c.download(ctx, v)
	if !ok {
		return
	}
	defer release()
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), downloadTimeout)
	defer cancel()
	st, ok, err := c.o.ScoredFiles.Stored(rctx, v.Marketplace.ID, day)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	if !ok {
		c.notFound(ctx, "The file of "+st.Date)
		return
	}
	vendor := scopeOf(v)
	if vendor == "" {
		body, err := c.o.ScoredFiles.Open(rctx, st)
		if err != nil {
			c.fail(ctx, err)
			return
		}
		defer body.Close()
		c.attachment(ctx, "application/vnd.apache.parquet", scoredfiles.FileName(st.Date), st.Size())
		_, err = io.Copy(c.streamWriter(ctx), body)
		if err != nil {
			c.o.Log.WarnContext(ctx, "console: file download cut short", "day", st.Date, "err", err)
			abortStream(ctx)
		}
		return
	}
	c.attachment(ctx, "application/vnd.apache.parquet", scoredfiles.VendorFileName(st.Date, vendorid.String(v.Marketplace.ID, vendor)), -1)
	// Nothing is sent before the stored file's footer is read: a failure
	// until then is an error page.
	if _, err := c.o.ScoredFiles.CopyVendor(rctx, st, vendor, c.streamWriter(ctx)); err != nil {
		if !ctx.Writer.Written() {
			for _, h := range []string{"Content-Type", "Content-Disposition", "Content-Length"} {
				ctx.Writer.Header().Del(h)
			}
			c.fail(ctx, err)
			return
		}
		c.o.Log.WarnContext(ctx, "console: file download cut short", "day", st.Date, "vendor", vendor, "err", err)
		abortStream(ctx)
	}
}

// --- streaming ---

// attachment writes the headers of a download (size < 0: unknown).
func (c *Console) attachment(ctx *gin.Context, contentType, name string, size int64) {
	h := ctx.Writer.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	ctx.Status(http.StatusOK)
}

// streamWriter writes to the browser, moving the server's write deadline
// forward after each write: a download takes as long as it makes progress.
func (c *Console) streamWriter(ctx *gin.Context) io.Writer {
	return &progressWriter{w: ctx.Writer, rc: http.NewResponseController(ctx.Writer)}
}

type progressWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (p *progressWriter) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(idleWrite))
	return p.w.Write(b)
}

// abortStream ends a download that failed midway by closing the
// connection, so that the browser reports a failed download instead of
// keeping a file that looks whole.
func abortStream(ctx *gin.Context) {
	ctx.Abort()
	if !ctx.Writer.Written() {
		return
	}
	if conn, _, err := http.NewResponseController(ctx.Writer).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// --- helpers ---

func set(vals []string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// problemsText is the export service's problems as one message, each
// after the label of the form's field it is about (the service's messages
// name the API's fields).
func problemsText(probs []exports.Problem) string {
	labels := map[string]string{"dataset": "Dataset", "dimensions": "Dimensions", "metrics": "Metrics", "granularity": "Granularity",
		"startDate": "First day", "endDate": "Last day", "format": "Format", "status": "Status",
		"created_from": "Requested from", "created_to": "Requested until"}
	parts := make([]string, 0, len(probs))
	for _, p := range probs {
		field, _, _ := strings.Cut(p.Field, "[")
		msg := strings.TrimSuffix(p.Message, ".")
		switch {
		case p.Code == exports.CodeInvalidCursor:
			msg = "This page's link is not valid (altered, or of another list): start again from the first page"
		case p.Code == exports.CodeInvalidRange:
			msg = "The last day must not be before the first day"
		case labels[field] != "":
			msg = labels[field] + ": " + msg
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ") + "."
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

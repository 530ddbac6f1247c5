package exports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/storage/statelog"
)

// Status of an export.
type Status string

// Statuses: pending (accepted, queued) → running (a worker has it; back to
// running when another worker retries it) → completed or failed.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// Terminal says whether the status no longer changes.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// Export is an export's record on the entities log, keyed by marketplace
// and export id. Every change of status is a new version.
type Export struct {
	ID         string     `json:"exportId"`
	Status     Status     `json:"status"`
	Dataset    string     `json:"dataset"`
	CreatedAt  time.Time  `json:"createdAt"`
	Request    Request    `json:"request"`
	Attempts   int        `json:"attempts,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Key        string     `json:"key,omitempty"` // object key of the file
	Rows       int64      `json:"rows,omitempty"`
	SizeBytes  int64      `json:"sizeBytes,omitempty"`
	Failure    string     `json:"failure,omitempty"`
	// DataAsOf and Partial, once completed: the file counts every event
	// acknowledged before DataAsOf (nil: unknown); Partial says the
	// window's last day had not ended by then (or DataAsOf is unknown).
	DataAsOf *time.Time `json:"dataAsOf,omitempty"`
	Partial  *bool      `json:"partial,omitempty"`
	// VendorID, when set, is the catalog id of the vendor the export was
	// requested for (by one of its users, in the console): its file holds
	// that vendor's rows only, and only that vendor's users (and the
	// marketplace's operators) may read it.
	VendorID string `json:"vendorId,omitempty"`
}

// TypeExport is the entity type of export records on the entities log.
const TypeExport = "export"

// Job is the record of the jobs topic, keyed by export id: the export to run.
type Job struct {
	MarketplaceID string `json:"marketplaceId"`
	ExportID      string `json:"exportId"`
}

// Defaults of Options.
const (
	DefaultDailyQuota     = 50
	DefaultVendorQuota    = 10
	DefaultURLLifetime    = time.Hour
	DefaultProduceTimeout = 5 * time.Second
)

// Options configure a Service.
type Options struct {
	ClickHouse clickhouse.Conn
	S3         *s3store.Store
	Redis      redis.UniversalClient
	Kafka      *kgo.Client // producer of the jobs
	JobsTopic  string
	// DailyQuota: exports a marketplace may request per UTC day.
	DailyQuota int
	// VendorDailyQuota: exports each vendor's users may request per UTC
	// day, counted apart from the marketplace's.
	VendorDailyQuota int
	// URLLifetime of the presigned URLs of completed exports.
	URLLifetime time.Duration
	// ProduceTimeout bounds the append of a job.
	ProduceTimeout time.Duration
	// Location is the time zone of a marketplace's local days (nil, or a
	// nil answer: the westernmost zone's, when an export's window ends).
	Location func(marketplaceID string) *time.Location
	// Ledger holds the vendors' balance movements and Currency a
	// marketplace's currency (the balance_ledger dataset; nil: its files
	// hold the charges only, without a currency on the movements).
	Ledger   Ledger
	Currency func(marketplaceID string) string
	Log      *slog.Logger
	Now      func() time.Time
}

// Service accepts exports and answers their status.
type Service struct {
	o     Options
	items *statelog.Collection[Export]
	quota *quota
}

// New registers the export records on the entities log.
func New(entities *statelog.Log, o Options) *Service {
	if o.DailyQuota <= 0 {
		o.DailyQuota = DefaultDailyQuota
	}
	if o.VendorDailyQuota <= 0 {
		o.VendorDailyQuota = DefaultVendorQuota
	}
	if o.URLLifetime <= 0 {
		o.URLLifetime = DefaultURLLifetime
	}
	if o.ProduceTimeout <= 0 {
		o.ProduceTimeout = DefaultProduceTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o, items: statelog.NewCollection[Export](entities, TypeExport), quota: &quota{rdb: o.Redis}}
}

// Errors of Create and Get.
var (
	// ErrQuota means the marketplace used its daily quota.
	ErrQuota = errkind.New(errkind.TooMany, "this marketplace has requested its exports of the day (UTC)")
	// ErrVendorQuota means the vendor used its daily quota.
	ErrVendorQuota = errkind.New(errkind.TooMany, "this vendor has requested its exports of the day (UTC)")
	// ErrUnavailable means Redis or the log could not take the export.
	ErrUnavailable = errkind.New(errkind.Unavailable, "the export could not be accepted right now; nothing was queued; retry later")
	// ErrUnconfirmed means the export's record or job was in flight when
	// ctx ended: it may still be accepted (it wraps ErrUnavailable).
	ErrUnconfirmed = fmt.Errorf("%w: the export may still be accepted", ErrUnavailable)
	// ErrNotFound: no such export in this marketplace.
	ErrNotFound = errkind.New(errkind.NotFound, "no such export in this marketplace")
)

// InvalidError carries every problem of a request.
type InvalidError struct{ Problems []Problem }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("exports: invalid request: %s: %s", e.Problems[0].Field, e.Problems[0].Message)
}

// DailyQuota is the number of exports a marketplace may request a day.
func (s *Service) DailyQuota() int { return s.o.DailyQuota }

// VendorDailyQuota is the number of exports a vendor may request a day.
func (s *Service) VendorDailyQuota() int { return s.o.VendorDailyQuota }

// CreateForVendor is Create for one vendor of mp (its catalog id): the
// export's file holds the rows of that vendor's campaigns only, and the
// export counts against the vendor's own daily quota (VendorDailyQuota),
// not the marketplace's.
func (s *Service) CreateForVendor(ctx context.Context, mp, vendor string, r Request) (Export, error) {
	if vendor == "" {
		return Export{}, errkind.New(errkind.Invalid, "no vendor")
	}
	return s.create(ctx, mp, vendor, r)
}

// Create validates a request, counts it against the marketplace's daily
// quota, records the export as pending and queues its job. It returns the
// pending export once both are in the log. On a failure that wrote nothing,
// nothing is queued and the quota is given back; when the record or the job
// may still land (ctx ended while they were in flight), the export keeps its
// unit of the quota and Create returns an error wrapping ErrUnavailable.
//
// A request with an idempotency key (idempotency.NewID) creates the export
// whose id is derived from the key: a retry whose first attempt's export
// exists gets that export (its job appended again when it is still
// pending), and the quota counts it once.
func (s *Service) Create(ctx context.Context, mp string, r Request) (Export, error) {
	return s.create(ctx, mp, "", r)
}

func (s *Service) create(ctx context.Context, mp, vendor string, r Request) (Export, error) {
	now := s.o.Now().UTC()
	if probs := r.Validate(now); len(probs) > 0 {
		return Export{}, &InvalidError{Problems: probs}
	}
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Export{}, err
	}
	if keyed {
		if e, _, ok := s.items.Get(mp, id); ok && e.VendorID == vendor {
			return s.existing(ctx, mp, e), nil
		}
	}
	day := now.Format(time.DateOnly)
	qscope, limit := mp, s.o.DailyQuota
	if vendor != "" {
		qscope, limit = vendorQuotaScope(mp, vendor), s.o.VendorDailyQuota
	}
	ok, err := s.quota.take(ctx, qscope, day, id, limit)
	if err != nil {
		return Export{}, fmt.Errorf("%w: quota: %w", ErrUnavailable, err)
	}
	if !ok && vendor != "" {
		return Export{}, ErrVendorQuota
	}
	if !ok {
		return Export{}, ErrQuota
	}
	e := Export{ID: id, Status: StatusPending, Dataset: r.Dataset, CreatedAt: now.Truncate(time.Millisecond), Request: r, VendorID: vendor}
	if _, err := s.items.Put(ctx, mp, e.ID, 0, e); err != nil {
		switch {
		case keyed && errors.Is(err, statelog.ErrConflict):
			// The first attempt's record landed meanwhile, or is being
			// written by it still.
			if cur, _, ok := s.items.Get(mp, id); ok && cur.VendorID == vendor {
				return s.existing(ctx, mp, cur), nil
			}
			return Export{}, fmt.Errorf("%w: an earlier attempt of this request is still being written: %w", ErrUnconfirmed, err)
		case errors.Is(err, statelog.ErrInFlight):
			return Export{}, fmt.Errorf("%w: %w", ErrUnconfirmed, err) // it may land: the unit stays counted
		}
		s.quota.giveBack(context.WithoutCancel(ctx), qscope, day, id)
		if errors.Is(err, statelog.ErrUnavailable) || errors.Is(err, statelog.ErrNotReady) {
			return Export{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return Export{}, err
	}
	if err := s.queue(ctx, mp, e.ID); err != nil {
		if errors.Is(err, kafka.ErrNotAcknowledged) {
			return Export{}, fmt.Errorf("%w: queue job: %w", ErrUnconfirmed, err)
		}
		if !keyed {
			// Nothing will run it; without a key the client's retry is a new
			// export: this one is failed (so that the sweep does not run it)
			// and its unit given back. With a key, the retry queues it.
			s.quota.giveBack(context.WithoutCancel(ctx), qscope, day, id)
			go s.failUnqueued(context.WithoutCancel(ctx), mp, e)
			return Export{}, fmt.Errorf("%w: queue job: %w", ErrUnavailable, err)
		}
		return Export{}, fmt.Errorf("%w: queue job: %w", ErrUnconfirmed, err)
	}
	telemetry.Exports.WithLabelValues("accepted", r.Format).Inc()
	return e, nil
}

// existing is the answer to the retry of a keyed request whose export
// exists: that export, its job appended again while it is pending (the
// first attempt may have failed before it queued it; a job twice is run
// once).
func (s *Service) existing(ctx context.Context, mp string, e Export) Export {
	if e.Status == StatusPending {
		if err := s.queue(ctx, mp, e.ID); err != nil {
			s.o.Log.Warn("exports: job of a retried export not appended again; the sweep requeues it", "export", e.ID, "err", err)
		}
	}
	return e
}

// queue appends an export's job, waiting at most ProduceTimeout (and ctx).
func (s *Service) queue(ctx context.Context, mp, id string) error {
	val, err := json.Marshal(Job{MarketplaceID: mp, ExportID: id})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, s.o.ProduceTimeout)
	defer cancel()
	return kafka.Produce(pctx, s.o.Kafka, &kgo.Record{Topic: s.o.JobsTopic, Key: []byte(id), Value: val}).Wait(pctx)
}

// failUnqueued marks failed an export whose job could not be appended
// (best effort: a pending export without a job is also failed by the
// worker's sweep).
func (s *Service) failUnqueued(ctx context.Context, mp string, e Export) {
	e.Status, e.Failure = StatusFailed, "The export could not be queued; request it again."
	fin := s.o.Now().UTC()
	e.FinishedAt = &fin
	fctx, cancel := context.WithTimeout(ctx, s.o.ProduceTimeout)
	defer cancel()
	if _, err := s.items.Put(fctx, mp, e.ID, 1, e); err != nil {
		s.o.Log.Warn("exports: unqueued export not marked failed; the sweep will", "export", e.ID, "err", err)
	}
}

// View is what GET /export-service/exports/{id} answers.
type View struct {
	ExportID     string          `json:"exportId"`
	Status       Status          `json:"status"`
	Dataset      string          `json:"dataset"`
	CreatedAt    timestamp.Time  `json:"createdAt"`
	Format       string          `json:"format"`
	Granularity  string          `json:"granularity"`
	Dimensions   []string        `json:"dimensions"`
	Metrics      []string        `json:"metrics"`
	StartDate    string          `json:"startDate"`
	EndDate      string          `json:"endDate"`
	StartedAt    *timestamp.Time `json:"startedAt,omitempty"`
	CompletedAt  *timestamp.Time `json:"completedAt,omitempty"`
	DataAsOf     *timestamp.Time `json:"dataAsOf,omitempty"`
	Partial      *bool           `json:"partial,omitempty"`
	FailedAt     *timestamp.Time `json:"failedAt,omitempty"`
	RowCount     *int64          `json:"rowCount,omitempty"`
	SizeBytes    *int64          `json:"sizeBytes,omitempty"`
	URL          string          `json:"url,omitempty"`
	URLExpiresAt *timestamp.Time `json:"urlExpiresAt,omitempty"`
	Error        *ViewError      `json:"error,omitempty"`
	// VendorID: the vendor an export was requested for (absent: the
	// marketplace's).
	VendorID string `json:"vendorId,omitempty"`
}

// ViewError says why an export failed.
type ViewError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Get returns an export of mp with, once completed, a fresh presigned URL
// of its file.
func (s *Service) Get(ctx context.Context, mp, id string) (View, error) {
	e, _, ok := s.items.Get(mp, id)
	if !ok {
		return View{}, ErrNotFound
	}
	return s.ViewOf(ctx, e)
}

// ViewOf is an export record as GET answers it (a completed one with a
// fresh presigned URL of its file).
func (s *Service) ViewOf(ctx context.Context, e Export) (View, error) {
	v := View{ExportID: e.ID, Status: e.Status, Dataset: e.Dataset, CreatedAt: timestamp.Of(e.CreatedAt), Format: e.Request.Format,
		Granularity: e.Request.Granularity, Dimensions: e.Request.Dimensions, Metrics: e.Request.Metrics,
		StartDate: e.Request.StartDate, EndDate: e.Request.EndDate, StartedAt: timestamp.OptOf(e.StartedAt), VendorID: e.VendorID}
	switch e.Status {
	case StatusCompleted:
		url, exp, err := s.o.S3.PresignGet(ctx, e.Key, s.o.URLLifetime)
		if err != nil {
			return View{}, err
		}
		rows, size := e.Rows, e.SizeBytes
		v.CompletedAt, v.RowCount, v.SizeBytes, v.URL, v.URLExpiresAt = timestamp.OptOf(e.FinishedAt), &rows, &size, url, timestamp.OptOf(&exp)
		v.DataAsOf, v.Partial = timestamp.OptOf(e.DataAsOf), e.Partial
	case StatusFailed:
		v.FailedAt = timestamp.OptOf(e.FinishedAt)
		v.Error = &ViewError{Code: CodeInternal, Message: e.Failure}
	}
	return v, nil
}

// ErrNotReady: the export has no file (yet): it is pending, running or failed.
var ErrNotReady = errkind.New(errkind.Conflict, "the export has no file: it is not completed")

var errFileUnavailable = errkind.New(errkind.Unavailable, "the export's file cannot be read right now; retry later")

// File is a completed export's file being read.
type File struct {
	Export      Export
	Name        string // a file name for a download: endcap-export-<id>.csv
	ContentType string
	Size        int64
	Body        io.ReadCloser // close it
}

// Open opens the file of export id of mp for reading as a stream (ctx
// bounds the read). vendor is who asks: "" for the marketplace (every
// export), a vendor's catalog id for its users, who read only the exports
// requested for that vendor; any other export is ErrNotFound to them, as
// an unknown id is.
func (s *Service) Open(ctx context.Context, mp, vendor, id string) (File, error) {
	e, _, ok := s.items.Get(mp, id)
	if !ok || (vendor != "" && e.VendorID != vendor) {
		return File{}, ErrNotFound
	}
	if e.Status != StatusCompleted || e.Key == "" {
		return File{}, ErrNotReady
	}
	obj, ok, err := s.o.S3.Get(ctx, e.Key)
	if err != nil {
		return File{}, fmt.Errorf("%w: %w", errFileUnavailable, err)
	}
	if !ok {
		// Removed by the bucket's lifecycle rule.
		return File{}, errkind.New(errkind.NotFound, "the export's file is no longer stored; request the export again")
	}
	return File{Export: e, Name: "endcap-export-" + e.ID + extension(e.Request.Format), ContentType: contentType(e.Request.Format),
		Size: obj.Size, Body: obj.Body}, nil
}

// Package scoredfiles produces the daily scored-attribution files: one
// Parquet object per marketplace and local day with that day's attributed
// purchased items and the score of each attribution, written to S3 with a
// multipart upload that publishes the object all at once, and hands out
// presigned URLs to them (docs/reference/scored-attribution.md).
package scoredfiles

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
)

const (
	// DefaultURLLifetime is how long a presigned URL works.
	DefaultURLLifetime = time.Hour
	// DefaultRowGroupRows bounds the rows a row group holds in memory
	// before it is encoded and streamed to the upload.
	DefaultRowGroupRows = 50_000
	// lockTTL is the lease of a day's lock; it is renewed while the day runs.
	lockTTL = 30 * time.Second
	// writeBatch is how many records are handed to the Parquet writer at once.
	writeBatch = 1024
	// headTimeout bounds the S3 HEAD of the endpoint.
	headTimeout = 5 * time.Second
	// contentType of the files.
	contentType = "application/vnd.apache.parquet"
)

// Object metadata keys (x-amz-meta-*).
const (
	metaProducedAt = "produced-at"
	metaFinal      = "final"
	metaSchema     = "schema"
)

// Marketplace is what producing a day needs to know of a marketplace.
type Marketplace struct {
	ID       string
	Location *time.Location // defines the local day; nil means UTC
}

// Service produces and lists the files.
type Service struct {
	ch  clickhouse.Conn
	s3  *s3store.Store
	rdb redis.UniversalClient
	log *slog.Logger

	// URLLifetime is the lifetime of presigned URLs (DefaultURLLifetime).
	URLLifetime time.Duration
	// RowGroupRows and PartSize bound the memory of one run: one row group
	// of records plus one upload part (0: the defaults).
	RowGroupRows int64
	PartSize     int

	now       func() time.Time
	afterPart func(n int) // test hook: called after each uploaded part
}

// New returns a Service.
func New(ch clickhouse.Conn, s3 *s3store.Store, rdb redis.UniversalClient, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{ch: ch, s3: s3, rdb: rdb, log: log, URLLifetime: DefaultURLLifetime, now: time.Now}
}

// WithURLLifetime sets the lifetime of presigned URLs (d > 0) and returns s.
func (s *Service) WithURLLifetime(d time.Duration) *Service {
	if d > 0 {
		s.URLLifetime = d
	}
	return s
}

// Key is the object key of a marketplace's file for a local day.
func Key(marketplaceID string, day time.Time) string {
	return "scored-attribution/" + marketplaceID + "/" + day.Format(time.DateOnly) + "/part-0.parquet"
}

// Result describes one produced file.
type Result struct {
	Key        string
	Rows       int64
	SizeBytes  int64
	ProducedAt time.Time
	Final      bool
}

// DayEnd is the UTC instant the local day ends in loc.
func DayEnd(day time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	return time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc).UTC()
}

// Produce writes the file of one local day of mp, replacing the previous
// one at once when the upload completes. It holds a Redis lock on the day
// while it runs (ErrBusy when another process holds it). On any failure,
// cancellation included, the upload is aborted and the key keeps its
// previous object, or stays absent.
func (s *Service) Produce(ctx context.Context, mp Marketplace, day time.Time) (Result, error) {
	if _, err := uuid.Parse(mp.ID); err != nil {
		return Result{}, fmt.Errorf("scoredfiles: marketplace id %q: %w", mp.ID, err)
	}
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	lctx, release, err := redisstore.Lease(ctx, s.rdb, "ec:lock:scored-attribution:"+mp.ID+":"+day.Format(time.DateOnly), lockTTL)
	if err != nil {
		return Result{}, err
	}
	defer release()
	return s.produce(lctx, mp, day)
}

func (s *Service) produce(ctx context.Context, mp Marketplace, day time.Time) (Result, error) {
	start := s.now().UTC()
	res := Result{Key: Key(mp.ID, day), ProducedAt: start.Truncate(time.Millisecond)}
	// Attribution of purchases before the day's end no longer changes once
	// FinalAfter has passed (and the projector has caught up).
	res.Final = !start.Before(attribution.FinalAfter(DayEnd(day, mp.Location)))
	// Under the lock, an unfinished upload of this key is a dead run's.
	if err := s.s3.AbortStale(ctx, res.Key, start); err != nil {
		s.log.Warn("scored attribution: stale uploads not aborted", "key", res.Key, "err", err)
	}
	up, err := s.s3.NewUpload(ctx, res.Key, contentType, map[string]string{
		metaProducedAt: timestamp.Format(res.ProducedAt),
		metaFinal:      strconv.FormatBool(res.Final),
		metaSchema:     SchemaVersion,
	}, s.PartSize)
	if err != nil {
		return Result{}, err
	}
	up.AfterPart = s.afterPart
	defer up.Abort() // no-op after Complete

	rgRows := s.RowGroupRows
	if rgRows <= 0 {
		rgRows = DefaultRowGroupRows
	}
	w := parquet.NewGenericWriter[Record](up,
		parquet.MaxRowsPerRowGroup(rgRows),
		parquet.Compression(&zstd.Codec{}),
		parquet.CreatedBy("endcap", "scored-attribution", SchemaVersion),
		parquet.KeyValueMetadata("endcap.schema", SchemaVersion),
		parquet.KeyValueMetadata("endcap.marketplace_id", mp.ID),
		parquet.KeyValueMetadata("endcap.day_local", day.Format(time.DateOnly)),
		parquet.KeyValueMetadata("endcap.produced_at", timestamp.Format(res.ProducedAt)),
		parquet.KeyValueMetadata("endcap.final", strconv.FormatBool(res.Final)),
	)
	batch := make([]Record, 0, writeBatch)
	flush := func() error {
		if _, err := w.Write(batch); err != nil {
			return fmt.Errorf("scoredfiles: write parquet: %w", err)
		}
		res.Rows += int64(len(batch))
		batch = batch[:0]
		return nil
	}
	err = attribution.LocalDay(ctx, s.ch, mp.ID, day, func(r *attribution.Row) error {
		batch = append(batch, recordOf(r))
		if len(batch) == writeBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		if err = w.Close(); err != nil {
			err = fmt.Errorf("scoredfiles: finish parquet: %w", err)
		}
	}
	if ctx.Err() != nil {
		// Never publish a file whose read may have been cut short; say why
		// (cancelled, or the day's lock was lost).
		return Result{}, fmt.Errorf("scoredfiles: %s %s: %w", mp.ID, day.Format(time.DateOnly), context.Cause(ctx))
	}
	if err != nil {
		return Result{}, err
	}
	if res.SizeBytes, err = up.Complete(); err != nil {
		return Result{}, err
	}
	s.log.Info("scored attribution file produced", "marketplace", mp.ID, "day", day.Format(time.DateOnly),
		"rows", res.Rows, "bytes", res.SizeBytes, "final", res.Final, "took", s.now().Sub(start).Round(time.Millisecond))
	return res, nil
}

// File is one downloadable file of a day.
type File struct {
	Date       string         `json:"date"`    // the local day, YYYY-MM-DD
	FileURL    string         `json:"fileUrl"` // presigned GET URL
	ExpiresAt  timestamp.Time `json:"expiresAt"`
	SizeBytes  int64          `json:"sizeBytes"`
	ProducedAt timestamp.Time `json:"producedAt"`
	Final      bool           `json:"final"`
}

// ErrUnavailable means the object store could not be read.
var ErrUnavailable = errkind.New(errkind.Unavailable, "report files cannot be listed right now; retry later")

// Files lists the files of a marketplace's local day with presigned URLs;
// an empty list when the day has not been produced.
func (s *Service) Files(ctx context.Context, marketplaceID string, day time.Time) ([]File, error) {
	key := Key(marketplaceID, day)
	hctx, cancel := context.WithTimeout(ctx, headTimeout)
	info, ok, err := s.s3.Head(hctx, key)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !ok {
		return []File{}, nil
	}
	url, exp, err := s.s3.PresignGet(ctx, key, s.URLLifetime)
	if err != nil {
		return nil, err
	}
	f := File{Date: day.Format(time.DateOnly), FileURL: url, ExpiresAt: timestamp.Of(exp), SizeBytes: info.Size, ProducedAt: timestamp.Of(info.LastModified.UTC())}
	if t, err := timestamp.Parse(info.Metadata[metaProducedAt]); err == nil { // written by Format, or in RFC 3339 with nanoseconds before
		f.ProducedAt = timestamp.Of(t)
	}
	f.Final = info.Metadata[metaFinal] == "true"
	return []File{f}, nil
}

// produced says whether the day's file exists and whether it is final.
func (s *Service) produced(ctx context.Context, marketplaceID string, day time.Time) (exists, final bool, err error) {
	info, ok, err := s.s3.Head(ctx, Key(marketplaceID, day))
	if err != nil || !ok {
		return false, false, err
	}
	return true, info.Metadata[metaFinal] == "true", nil
}

// ErrBusy means another process is producing the same day right now.
var ErrBusy = redisstore.ErrBusy

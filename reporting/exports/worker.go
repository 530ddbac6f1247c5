package exports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
)

// Defaults of WorkerOptions.
const (
	DefaultWorkers     = 1
	DefaultJobTimeout  = 30 * time.Minute
	DefaultMaxAttempts = 3
	DefaultStaleness   = 0
	DefaultGroup       = "endcap-exporter"
	leaseTTL           = 30 * time.Second
	sweepEvery         = time.Minute
	// requeueAfter: a pending export older than this, or a running one
	// that no worker holds, gets its job appended again (at most once per
	// requeueAfter).
	requeueAfter = 10 * time.Minute
	// RecordRetention: a finished export's record is deleted from the
	// entities log (and from every process's memory) this long after it
	// finished; its GET is then 404.
	RecordRetention = 30 * 24 * time.Hour
)

// WorkerOptions configure RunWorkers.
type WorkerOptions struct {
	Brokers []string
	Conn    kafka.Conn // how the workers' clients connect (TLS, SASL)
	Group   string
	// Workers: exports this process runs at once (one group member each).
	Workers int
	// PartSize of the multipart uploads (memory per running export).
	PartSize int
	// JobTimeout bounds one attempt of an export.
	JobTimeout time.Duration
	// MaxAttempts: attempts before an export is failed.
	MaxAttempts int
	// Refresh, when set, recomputes rollup days (rollups.Job.Refresh, which
	// waits for the projectors first); an export first recomputes the days
	// of its window whose watermark is more than MaxStaleness before it was
	// requested (0: every day that is not final and not recomputed since).
	Refresh      func(ctx context.Context, days []time.Time) error
	MaxStaleness time.Duration
	// Folded, when set, waits (boundedly) for the projectors to fold what
	// was acknowledged before the call and returns the instant up to which
	// they have (zero: unknown): a balance_ledger export's dataAsOf.
	Folded func(ctx context.Context) (time.Time, error)
	// SessionTimeout: how long the broker waits for a worker's heartbeats
	// before it hands the worker's jobs to another (0: the client's default).
	SessionTimeout time.Duration

	afterPart func(n int) // test hook
}

func (wo *WorkerOptions) defaults() {
	if wo.Group == "" {
		wo.Group = DefaultGroup
	}
	if wo.Workers <= 0 {
		wo.Workers = DefaultWorkers
	}
	if wo.JobTimeout <= 0 {
		wo.JobTimeout = DefaultJobTimeout
	}
	if wo.MaxAttempts <= 0 {
		wo.MaxAttempts = DefaultMaxAttempts
	}
	if wo.MaxStaleness < 0 {
		wo.MaxStaleness = 0
	}
}

// RunWorkers consumes the jobs topic with wo.Workers members of one
// consumer group (several processes share the jobs the same way) and runs
// each export, until ctx ends. A job's offset is committed only once its
// export is completed or failed, so a worker that dies mid-export leaves
// the job to the next owner of its partition.
func (s *Service) RunWorkers(ctx context.Context, wo WorkerOptions) error {
	wo.defaults()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i := range wo.Workers {
		opts := wo.Conn.With()
		if wo.SessionTimeout > 0 {
			opts = append(opts, kgo.SessionTimeout(wo.SessionTimeout), kgo.HeartbeatInterval(min(time.Second, wo.SessionTimeout/3)))
		}
		cl, err := kafka.NewClient(wo.Brokers, s.o.Log, append(opts,
			kgo.ClientID(fmt.Sprintf("%s-%d", wo.Group, i)),
			kgo.ConsumerGroup(wo.Group),
			kgo.ConsumeTopics(s.o.JobsTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(time.Second),
		)...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			if err := s.consume(ctx, cl, &wo); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("export worker %d: %w", i, err))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.sweep(ctx)
	}()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func (s *Service) consume(ctx context.Context, cl *kgo.Client, wo *WorkerOptions) error {
	for {
		fetches := cl.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			s.o.Log.Warn("exports: fetch error", "topic", t, "partition", p, "err", err)
		})
		for _, rec := range fetches.Records() {
			backoff := retry.New(time.Second, time.Minute)
			for {
				err := s.handle(ctx, rec, wo)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return nil
				}
				wait := backoff.Next()
				s.o.Log.Warn("exports: job will be retried", "export", string(rec.Key), "backoff", wait, "err", err)
				if retry.Sleep(ctx, wait) != nil {
					return nil
				}
			}
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			if err := cl.CommitRecords(cctx, rec); err != nil && ctx.Err() == nil {
				// The partition moved to another worker: it reads the job
				// again and finds the export finished.
				s.o.Log.Warn("exports: job offset not committed", "export", string(rec.Key), "err", err)
			}
			ccancel()
		}
	}
}

// handle runs one job. nil means the job is done with (the export is
// finished, or another worker owns it); an error means try it again.
func (s *Service) handle(ctx context.Context, rec *kgo.Record, wo *WorkerOptions) error {
	var j Job
	if err := json.Unmarshal(rec.Value, &j); err != nil || j.MarketplaceID == "" || j.ExportID == "" {
		s.o.Log.Error("exports: undecodable job skipped", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		return nil
	}
	// The record was appended before its job: wait for this view to see it.
	var e Export
	found := false
	for deadline := time.Now().Add(30 * time.Second); ; {
		if e, _, found = s.items.Get(j.MarketplaceID, j.ExportID); found || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !found {
		s.o.Log.Warn("exports: job of an unknown export skipped", "marketplace", j.MarketplaceID, "export", j.ExportID)
		return nil
	}
	// The job's work belongs to the trace of the request that asked for it
	// (its record's headers; docs/operations/operations.md, Traces).
	if telemetry.Tracing() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, kafka.RecordSpanContext(rec))
	}
	ctx, span := telemetry.StartSpan(ctx, "github.com/endcap/endcap/reporting/exports", "export job",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attribute.String("endcap.export.id", j.ExportID)))
	defer span.End()
	if e.Status.Terminal() {
		return nil
	}
	key := "ec:lock:export:" + j.ExportID
	lctx, release, err := redisstore.Lease(ctx, s.o.Redis, key, leaseTTL)
	for waited := time.Duration(0); errors.Is(err, redisstore.ErrBusy); waited += leaseTTL / 3 {
		// Another worker runs it (a rebalance, or a requeued job). Wait for
		// it to finish or to die; past that, the sweep requeues it.
		if waited > 2*leaseTTL {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(leaseTTL / 3):
		}
		if e, _, _ = s.items.Get(j.MarketplaceID, j.ExportID); e.Status.Terminal() {
			return nil
		}
		lctx, release, err = redisstore.Lease(ctx, s.o.Redis, key, leaseTTL)
	}
	if err != nil {
		return err
	}
	defer release()
	return s.attempt(lctx, ctx, j.MarketplaceID, j.ExportID, wo)
}

// attempt runs the export once under its lease (lctx ends when the lease
// is lost or ctx ends).
func (s *Service) attempt(lctx, ctx context.Context, mp, id string, wo *WorkerOptions) error {
	e, ver, _ := s.items.Get(mp, id)
	if e.Status.Terminal() {
		return nil
	}
	now := s.o.Now().UTC()
	if e.Attempts >= wo.MaxAttempts {
		return s.finish(ctx, mp, e, ver, nil, fmt.Errorf("gave up after %d attempts", e.Attempts))
	}
	if e.Attempts == 0 {
		telemetry.ExportQueueSeconds.Observe(now.Sub(e.CreatedAt).Seconds())
	}
	e.Status, e.Attempts, e.StartedAt = StatusRunning, e.Attempts+1, &now
	ver, err := s.items.Put(lctx, mp, id, ver, e)
	if err != nil {
		if errors.Is(err, statelog.ErrConflict) {
			return fmt.Errorf("export changed meanwhile: %w", err)
		}
		return err
	}
	s.o.Log.Info("exports: export started", "marketplace", mp, "export", id, "attempt", e.Attempts,
		"format", e.Request.Format, "from", e.Request.StartDate, "to", e.Request.EndDate)
	jctx, cancel := context.WithTimeout(lctx, wo.JobTimeout)
	jctx, span := telemetry.StartSpan(jctx, "github.com/endcap/endcap/reporting/exports", "export attempt",
		trace.WithAttributes(attribute.Int("endcap.export.attempt", e.Attempts), attribute.String("endcap.export.format", e.Request.Format)))
	res, err := s.produce(jctx, mp, &e, wo)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // shutting down: the next owner runs it again
	}
	if err != nil && lctx.Err() != nil {
		return fmt.Errorf("lease lost: %w", context.Cause(lctx))
	}
	if err != nil && e.Attempts < wo.MaxAttempts && !errors.Is(err, errPermanent) {
		telemetry.Exports.WithLabelValues("retried", e.Request.Format).Inc()
		return err
	}
	return s.finish(ctx, mp, e, ver, &res, err)
}

// errPermanent marks failures another attempt cannot fix.
var errPermanent = errors.New("permanent")

// finish records the export's end: completed with its file, or failed.
func (s *Service) finish(ctx context.Context, mp string, e Export, ver int64, res *result, runErr error) error {
	fin := s.o.Now().UTC()
	e.FinishedAt = &fin
	if runErr == nil {
		e.Status, e.Key, e.Rows, e.SizeBytes = StatusCompleted, res.key, res.rows, res.size
		partial := res.partial
		e.Partial, e.DataAsOf = &partial, nil
		if !res.dataAsOf.IsZero() {
			asOf := res.dataAsOf.UTC()
			e.DataAsOf = &asOf
		}
		telemetry.Exports.WithLabelValues("completed", e.Request.Format).Inc()
		telemetry.ExportSeconds.WithLabelValues(e.Request.Format).Observe(fin.Sub(*e.StartedAt).Seconds())
		telemetry.ExportRows.WithLabelValues(e.Request.Format).Add(float64(res.rows))
		s.o.Log.Info("exports: export completed", "marketplace", mp, "export", e.ID, "rows", res.rows, "bytes", res.size,
			"dataAsOf", res.dataAsOf, "partial", res.partial, "took", fin.Sub(*e.StartedAt).Round(time.Millisecond))
	} else {
		e.Status, e.Failure = StatusFailed, "The export could not be produced ("+runErr.Error()+"); request it again."
		telemetry.Exports.WithLabelValues("failed", e.Request.Format).Inc()
		s.o.Log.Error("exports: export failed", "marketplace", mp, "export", e.ID, "attempts", e.Attempts, "err", runErr)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.items.Put(pctx, mp, e.ID, ver, e)
	return err
}

// sweep requeues the exports whose job was lost: pending for longer than
// requeueAfter (the job append failed after the record), or running with
// no worker holding them (the worker died and its job was skipped).
func (s *Service) sweep(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sweepOnce(ctx)
	}
}

// sweepOnce requeues the stuck exports and deletes the expired records.
func (s *Service) sweepOnce(ctx context.Context) {
	now := s.o.Now()
	for _, mp := range s.items.Marketplaces() {
		var stuck, expired []Export
		s.items.Each(mp, func(_ string, e Export) bool {
			switch {
			case (e.Status == StatusPending || e.Status == StatusRunning) && now.Sub(e.CreatedAt) > requeueAfter:
				stuck = append(stuck, e)
			case e.Status.Terminal() && e.FinishedAt != nil && now.Sub(*e.FinishedAt) > RecordRetention:
				expired = append(expired, e)
			}
			return true
		})
		for _, e := range stuck {
			s.requeue(ctx, mp, e)
		}
		for _, e := range expired {
			s.expire(ctx, mp, e.ID)
		}
	}
}

// expire deletes a finished export's record (another exporter's sweep may
// race it: a conflict is fine).
func (s *Service) expire(ctx context.Context, mp, id string) {
	_, ver, ok := s.items.Get(mp, id)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.items.Delete(ctx, mp, id, ver); err != nil && !errors.Is(err, statelog.ErrConflict) {
		s.o.Log.Warn("exports: expired record not deleted", "export", id, "err", err)
	}
}

func (s *Service) requeue(ctx context.Context, mp string, e Export) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if e.Status == StatusRunning {
		if n, err := s.o.Redis.Exists(ctx, "ec:lock:export:"+e.ID).Result(); err != nil || n == 1 {
			return // a worker holds it
		}
	}
	if ok, err := s.o.Redis.SetNX(ctx, "ec:exports:requeued:"+e.ID, strconv.FormatInt(s.o.Now().Unix(), 10), requeueAfter).Result(); err != nil || !ok {
		return
	}
	val, _ := json.Marshal(Job{MarketplaceID: mp, ExportID: e.ID})
	if err := kafka.Produce(ctx, s.o.Kafka, &kgo.Record{Topic: s.o.JobsTopic, Key: []byte(e.ID), Value: val}).Wait(ctx); err != nil {
		s.o.Log.Warn("exports: requeue failed", "export", e.ID, "err", err)
		return
	}
	telemetry.Exports.WithLabelValues("requeued", e.Request.Format).Inc()
	s.o.Log.Warn("exports: export requeued", "marketplace", mp, "export", e.ID, "status", e.Status)
}

package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/internal/telemetry"
)

// auctionLossLogInterval is the least time between two log lines about lost
// auction records; the counts in between go into the next line (and every
// loss is in endcap_auction_records_total).
const auctionLossLogInterval = 10 * time.Second

// AuctionPublisher puts auction records on the auctions topic without ever
// making the auction wait. It implements auction.Recorder.
//
// Unlike the events Appender it does not wait for acknowledgements: a record
// goes into the client's producer buffer with TryProduce, which fails at once
// with kgo.ErrMaxBuffered when the buffer is full (Kafka slow or down)
// instead of blocking. Such a record is dropped and counted. Dropping is the
// designed behaviour: nothing that moves money reads the auctions topic
// (charging reads the resolvedBidId alone), so a lost record costs reporting
// detail, never money.
type AuctionPublisher struct {
	client *kgo.Client
	topic  string
	log    *slog.Logger

	ok, dropped, failed prometheus.Counter

	// Rate limiting of loss logs: the unix-nano time of the last line and
	// the losses since then.
	lastLog                   atomic.Int64
	droppedSince, failedSince atomic.Int64
	lastErr                   atomic.Pointer[string]
}

var _ auction.Recorder = (*AuctionPublisher)(nil)

// NewAuctionPublisher returns a publisher producing to topic on cl. The
// client's MaxBufferedRecords/MaxBufferedBytes bound the records waiting for
// Kafka; beyond them records are dropped.
func NewAuctionPublisher(cl *kgo.Client, topic string, log *slog.Logger) *AuctionPublisher {
	if log == nil {
		log = slog.Default()
	}
	return &AuctionPublisher{
		client:  cl,
		topic:   topic,
		log:     log,
		ok:      telemetry.AuctionRecords.WithLabelValues("ok"),
		dropped: telemetry.AuctionRecords.WithLabelValues("dropped"),
		failed:  telemetry.AuctionRecords.WithLabelValues("error"),
	}
}

// kafkaRecords holds the Kafka records of auction records between
// auctions, each with the buffer its key and value share (Value's array):
// the record and its bytes were 1.4 KB of garbage per auction. A record
// comes back once its promise ran: the client does not touch it after that.
var kafkaRecords = sync.Pool{New: func() any { return new(kgo.Record) }}

// maxPooledRecord is the largest buffer kafkaRecords keeps.
const maxPooledRecord = 64 << 10

// Record encodes r and queues it for the auctions topic, keyed by its
// marketplace id. It never blocks on Kafka: the outcome is counted (and
// losses logged, rate-limited) when the client reports it. r is not retained.
func (p *AuctionPublisher) Record(r *auction.Record) {
	if r == nil {
		return
	}
	kr := kafkaRecords.Get().(*kgo.Record)
	b, err := r.AppendJSON(kr.Value[:0])
	if err != nil {
		// Only a time outside years 0..9999 can fail here: a bug upstream.
		kafkaRecords.Put(kr)
		p.failed.Inc()
		p.lost(false, err)
		return
	}
	n := len(b)
	b = append(b, r.MarketplaceID...)
	*kr = kgo.Record{Topic: p.topic, Key: b[n:], Value: b[:n]}
	// The background context: the record outlives the request that ran the
	// auction. What bounds its life is the producer buffer (and the client's
	// delivery timeout, if it has one).
	p.client.TryProduce(context.Background(), kr, p.done)
}

// done is the produce promise. It runs on the client's promise goroutine, so
// it only counts and (rarely) logs, then hands the record back for reuse.
func (p *AuctionPublisher) done(kr *kgo.Record, err error) {
	defer func() {
		buf := kr.Value[:0] // the whole buffer: Value starts it, Key follows
		if cap(buf) > maxPooledRecord {
			buf = nil
		}
		*kr = kgo.Record{Value: buf}
		kafkaRecords.Put(kr)
	}()
	switch {
	case err == nil:
		p.ok.Inc()
	case errors.Is(err, kgo.ErrMaxBuffered):
		p.dropped.Inc()
		p.lost(true, err)
	default:
		p.failed.Inc()
		p.lost(false, err)
	}
}

// lost notes one lost record and writes a log line at most once per
// auctionLossLogInterval, with the losses since the previous line.
func (p *AuctionPublisher) lost(dropped bool, err error) {
	if dropped {
		p.droppedSince.Add(1)
	} else {
		p.failedSince.Add(1)
		msg := err.Error()
		p.lastErr.Store(&msg)
	}
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(auctionLossLogInterval) || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	attrs := []any{"topic", p.topic,
		"dropped", p.droppedSince.Swap(0), "errors", p.failedSince.Swap(0)}
	if e := p.lastErr.Swap(nil); e != nil {
		attrs = append(attrs, "lastErr", *e)
	}
	p.log.Warn("auction records lost (reporting only; charging is unaffected)", attrs...)
}

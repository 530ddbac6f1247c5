package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/telemetry"
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

// Record encodes r and queues it for the auctions topic, keyed by its
// marketplace id. It never blocks on Kafka: the outcome is counted (and
// losses logged, rate-limited) when the client reports it. r is not retained.
func (p *AuctionPublisher) Record(r *auction.Record) {
	if r == nil {
		return
	}
	val, err := json.Marshal(r)
	if err != nil {
		// Only a time outside years 0..9999 can fail here: a bug upstream.
		p.failed.Inc()
		p.lost(false, err)
		return
	}
	// The background context: the record outlives the request that ran the
	// auction. What bounds its life is the producer buffer (and the client's
	// delivery timeout, if it has one).
	p.client.TryProduce(context.Background(), &kgo.Record{Topic: p.topic, Key: []byte(r.MarketplaceID), Value: val}, p.done)
}

// done is the produce promise. It runs on the client's promise goroutine, so
// it only counts and (rarely) logs.
func (p *AuctionPublisher) done(_ *kgo.Record, err error) {
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

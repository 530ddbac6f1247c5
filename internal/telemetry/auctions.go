package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Auction record pipeline (docs/design/auctions-pipeline.md).
var (
	// AuctionRecords counts auction records handed to the publisher, by
	// result: ok (acknowledged by Kafka), dropped (the producer buffer was
	// full: dropped instead of making the auction wait) or error (encoding
	// failed, or Kafka failed the record).
	AuctionRecords = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_auction_records_total",
		Help: "Auction records by result: ok (acknowledged by Kafka), dropped (producer buffer full), error (encoding or Kafka failure).",
	}, []string{"result"})

	// AuctionRecordsSkipped counts records of the auctions topic the
	// projector could not decode or validate, and skipped.
	AuctionRecordsSkipped = promauto.NewCounter(prometheus.CounterOpts{
		Name: "endcap_projector_auction_records_skipped_total",
		Help: "Auction records the projector skipped because it could not decode or validate them.",
	})
)

package auction

import "github.com/endcap/endcap/internal/records"

// Record is one auction as the auctions topic carries it (records.Auction:
// the topic's schema lives with the other records, so that the projector
// reads it without linking the engine).
type Record = records.Auction

// RecordWinner is one winner of an auction (records.AuctionWinner).
type RecordWinner = records.AuctionWinner

// Recorder takes auction records without blocking: an implementation
// queues them for the auctions topic and drops (and counts) what it cannot
// queue. It must not keep r nor its strings once Record returns: they
// share the request's bytes, reused after the request (Release).
type Recorder interface {
	Record(r *Record)
}

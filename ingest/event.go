// Package ingest turns tracking-event requests into validated records and
// appends them to the events log. It holds the /v2/events rules of the spec
// and of wire-contract.md; the HTTP layer only decodes and encodes.
package ingest

import "github.com/endcap/endcap/internal/records"

// The events topic's record types (package records), under the names the
// parser and the appender use.
type (
	Kind      = records.Kind
	Event     = records.Event
	Entity    = records.Entity
	Placement = records.Placement
	Page      = records.Page
	Object    = records.Object
	Item      = records.Item
)

// The kinds of events.
const (
	KindImpression = records.KindImpression
	KindClick      = records.KindClick
	KindPurchase   = records.KindPurchase
	KindPageView   = records.KindPageView
)

// Limits of a /v2/events request.
const (
	MaxEventsPerArray   = 50
	MaxOpaqueUserIDLen  = 90  // characters (runes)
	MaxEventIDLen       = 255 // characters; the spec sets none, we bound it
	MaxStringFieldLen   = 1024
	MaxResolvedBidIDLen = 512
	MaxFutureSkewMillis = records.MaxFutureSkewMillis // occurredAt up to 5 minutes ahead is accepted
	CountableAgeMillis  = records.CountableAgeMillis  // older events are stored, never charged nor counted
	MaxItemsPerPurchase = 500
	MaxQuantity         = 1_000_000
	// MaxUnitPriceMicros bounds a purchase item's unit price (one billion
	// currency units).
	MaxUnitPriceMicros = 1_000_000_000 * 1_000_000
	// MaxPurchaseTotalMicros bounds the sum of unitPrice × quantity of one
	// purchase (9 trillion currency units), so that every amount derived from a
	// purchase fits in int64 micro-units without overflow.
	MaxPurchaseTotalMicros = 9_000_000_000_000 * 1_000_000
)

// Package records holds the record types of Endcap's Kafka topics, the
// schema the API side writes and the pipeline reads: tracking events (the
// events topic) and auctions (the auctions topic). It is a leaf: the
// projectors read these types without linking the parsers or the auction
// engine that produce them.
package records

// Kind is the kind of a tracking event. Its string form is what is stored.
type Kind uint8

const (
	KindImpression Kind = iota + 1
	KindClick
	KindPurchase
	KindPageView
)

var kindNames = [...]string{"", "impression", "click", "purchase", "pageview"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Times of an event that the API and the pipeline both decide on.
const (
	// MaxFutureSkewMillis: an occurredAt up to 5 minutes ahead of the API's
	// clock is accepted (client clocks); the charge rules allow the same.
	MaxFutureSkewMillis = 5 * 60 * 1000
	// CountableAgeMillis: an event received more than 30 days after it
	// occurred is stored, never charged nor counted.
	CountableAgeMillis = 30 * 24 * 60 * 60 * 1000
)

// Event is one accepted tracking event, as it travels on the events topic and
// is stored by the projector. Times are Unix milliseconds, UTC. Money is
// integer micro-units of the marketplace currency.
type Event struct {
	Kind          Kind   `json:"k"`
	MarketplaceID string `json:"mp"`
	ID            string `json:"id"`
	OccurredAtMs  int64  `json:"at"`
	ReceivedAtMs  int64  `json:"rx"`
	OpaqueUserID  string `json:"u"`

	ResolvedBidID         string     `json:"rb,omitempty"`
	Entity                *Entity    `json:"en,omitempty"`
	AdditionalAttribution *Entity    `json:"aa,omitempty"`
	Placement             *Placement `json:"pl,omitempty"`
	Page                  *Page      `json:"pg,omitempty"`
	Object                *Object    `json:"ob,omitempty"`
	ExternalCampaignID    string     `json:"xc,omitempty"`
	ExternalVendorID      string     `json:"xv,omitempty"`
	DeviceType            string     `json:"dt,omitempty"`
	Channel               string     `json:"ch,omitempty"`
	ClickType             string     `json:"ct,omitempty"`
	Items                 []Item     `json:"it,omitempty"`
}

// Entity is an organic event's subject (`entity`, `additionalAttribution`).
type Entity struct {
	Type string `json:"t"` // product | vendor
	ID   string `json:"i"`
}

// Placement is where on the page an interaction happened. Zero integers mean
// "not given" (the wire format requires them to be >= 1 when present).
type Placement struct {
	Path        string   `json:"p,omitempty"`
	Position    int32    `json:"po,omitempty"`
	Page        int32    `json:"pa,omitempty"`
	PageSize    int32    `json:"ps,omitempty"`
	ProductID   string   `json:"pr,omitempty"`
	CategoryIDs []string `json:"ca,omitempty"`
	SearchQuery string   `json:"sq,omitempty"`
}

// Page is the page an event happened on. Value holds the string form as one
// element, or the array form as given.
type Page struct {
	Type  string   `json:"t"`
	ID    string   `json:"i"`
	Value []string `json:"v,omitempty"`
}

// Object is the interacted object (`object`).
type Object struct {
	Type      string `json:"t"`
	AssetID   string `json:"a,omitempty"`
	ClickType string `json:"c,omitempty"`
}

// Item is one purchased item.
type Item struct {
	ProductID       string `json:"p"`
	UnitPriceMicros int64  `json:"pr"`
	Quantity        int64  `json:"q"`
	VendorID        string `json:"v,omitempty"`
}

// Countable reports whether the event is recent enough, relative to when it
// was received, to be charged and counted in metrics.
func (e *Event) Countable() bool {
	return e.ReceivedAtMs-e.OccurredAtMs <= CountableAgeMillis
}

// EventKey is the partitioning key of an event: one user's events of one
// marketplace stay in order on one partition. An event without a user (its
// shopper's consent denied) is keyed by its id instead, so that such events
// spread over the partitions while every copy of one (a client's retry) still
// lands on the partition of the first, where the projector's claim finds it.
// The '#' keeps the two kinds of keys apart.
func EventKey(e *Event) []byte {
	if e.OpaqueUserID == "" {
		k := make([]byte, 0, len(e.MarketplaceID)+2+len(e.ID))
		k = append(k, e.MarketplaceID...)
		k = append(k, '#')
		return append(k, e.ID...)
	}
	k := make([]byte, 0, len(e.MarketplaceID)+1+len(e.OpaqueUserID))
	k = append(k, e.MarketplaceID...)
	k = append(k, '|')
	return append(k, e.OpaqueUserID...)
}

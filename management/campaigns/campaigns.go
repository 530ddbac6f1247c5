// Package campaigns owns the campaigns of vendors and their bids, and
// computes the bids of automated campaigns. Both are event-sourced on the
// entities log (storage/statelog) as collections "campaign" and
// "campaign_bid"; every process holds them in memory. What depends on other
// state (a campaign's status, whether a bid's product may still take part,
// the bids of an automated campaign) is computed at read time from the
// current catalog, never stored. docs/reference/campaigns.md describes the API.
package campaigns

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/statelog"
)

// Campaign types.
const (
	TypeListings  = "listings"
	TypeBanners   = "banners"
	TypeAutomated = "automated"
)

// Charge types.
const (
	ChargeCPC = "CPC"
	ChargeCPM = "CPM"
)

// Campaign statuses, derived at read time from the archive, the active flag
// and the dates.
const (
	StatusScheduled = "scheduled" // active, start date not reached yet
	StatusRunning   = "running"   // active, between start and end
	StatusPaused    = "paused"    // not active, end date not reached
	StatusEnded     = "ended"     // end date reached (whatever the flag)
	StatusArchived  = "archived"  // archived (DELETE): final, whatever the rest says
)

// Statuses are the campaign statuses, in the order the API lists them.
var Statuses = []string{StatusScheduled, StatusRunning, StatusPaused, StatusEnded, StatusArchived}

// Types are the campaign types, in the order the API lists them.
var Types = []string{TypeListings, TypeBanners, TypeAutomated}

// Bid target types.
const (
	TargetProduct  = "product"
	TargetCategory = "category"
	TargetKeyword  = "keyword"
)

// Reasons why a bid cannot win an auction (Eligibility; computed at read
// time). The auction's explanations use the same codes for the same causes.
const (
	ReasonProductNotFound    = "product_not_found"     // deleted from the catalog
	ReasonProductInactive    = "product_inactive"      // product active=false
	ReasonVendorNotPermitted = "vendor_not_permitted"  // the campaign's vendor is not among the product's vendors
	ReasonProductNoImage     = "product_without_image" // a banner needs the product's imageURL
	ReasonNoActiveProduct    = "no_active_product"     // keyword or category bid: no active product of the vendor it could promote
	ReasonBelowReserve       = "below_reserve"         // amount below the marketplace's reserve price of the charge type
)

// Limits.
const (
	MaxNameLen         = 255
	MaxTargetLen       = 255
	MaxKeywordLen      = 100
	MaxLocations       = 100
	MaxSegments        = 50
	MaxBidsPerCampaign = 10000
	MinPlacementID     = 1
	MaxPlacementID     = 8
)

// Targeting restricts where a campaign's ads may show. An empty list means
// no restriction on that dimension.
type Targeting struct {
	PlacementIDs []int    `json:"placementIds,omitempty"`
	Devices      []string `json:"devices,omitempty"`   // desktop, mobile
	Locations    []string `json:"locations,omitempty"` // canonical H3 cell ids
	Segments     []string `json:"segments,omitempty"`  // segment ids
}

// Campaign is the stored state of a campaign. Amounts are micro-units of
// the marketplace currency; 0 means "not set".
type Campaign struct {
	ID                string `json:"id"`
	VendorID          string `json:"vendorId"`
	Name              string `json:"name"`
	Type              string `json:"type"`
	ChargeType        string `json:"chargeType"`
	DailyBudgetMicros int64  `json:"dailyBudgetMicros,omitempty"`
	TotalBudgetMicros int64  `json:"totalBudgetMicros,omitempty"`
	// WeeklyBudgetMicros caps the spend of each local week (Monday to
	// Sunday, the marketplace's time zone), MonthlyBudgetMicros of each
	// local calendar month. A campaign has at most one of the daily, weekly
	// and monthly budgets (its budget period).
	WeeklyBudgetMicros  int64      `json:"weeklyBudgetMicros,omitempty"`
	MonthlyBudgetMicros int64      `json:"monthlyBudgetMicros,omitempty"`
	MaxBidMicros        int64      `json:"maxBidMicros,omitempty"` // automated campaigns only
	StartDate           time.Time  `json:"startDate"`
	EndDate             *time.Time `json:"endDate,omitempty"`
	Active              bool       `json:"active"`
	Targeting           Targeting  `json:"targeting"`
	BillingContactID    string     `json:"billingContactId,omitempty"`
	CreatedAt           time.Time  `json:"createdAt"`
	UpdatedAt           time.Time  `json:"updatedAt"`
	// ArchivedAt is when the campaign was archived (DELETE), nil while it is
	// not. An archived campaign never takes part in an auction again and
	// cannot be changed.
	ArchivedAt *time.Time `json:"archivedAt,omitempty"`
	// Restrictions are the campaign's frequency caps (restrictions.go);
	// CapsWithoutShopper what they do for a shopper they cannot count
	// (CapsServe when empty, or CapsSkip).
	Restrictions       []Restriction `json:"restrictions,omitempty"`
	CapsWithoutShopper string        `json:"capsWithoutShopper,omitempty"`
	// Timetables (dayparting) and NegativeKeywords: schedule.go.
	Timetables       []TimetableDay    `json:"timetables,omitempty"`
	NegativeKeywords []NegativeKeyword `json:"negativeKeywords,omitempty"`
}

// Archived reports whether c is archived.
func (c Campaign) Archived() bool { return c.ArchivedAt != nil }

// Bid is the stored state of a bid of a listings or banners campaign.
type Bid struct {
	ID           string    `json:"id"`
	CampaignID   string    `json:"campaignId"`
	TargetType   string    `json:"targetType"`
	Target       string    `json:"target"` // product id, category id or normalised keyword
	AmountMicros int64     `json:"amountMicros"`
	Active       bool      `json:"active"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	// NegativeKeywords keep this bid out of the auctions whose searchQuery
	// they match (schedule.go).
	NegativeKeywords []NegativeKeyword `json:"negativeKeywords,omitempty"`
}

// Status is the status of c at now: archived from its archive on, else
// ended once the end date is reached, else paused when not active, else
// scheduled before the start date, else running. It does not depend on
// spend or bids: StatusReason says why a running campaign does or does not
// take part in auctions.
func Status(c Campaign, now time.Time) string {
	return statusAt(c.ArchivedAt, c.EndDate, c.Active, c.StartDate, now)
}

// statusAt is Status of a campaign's fields.
func statusAt(archivedAt, endDate *time.Time, active bool, startDate, now time.Time) string {
	switch {
	case archivedAt != nil && !now.Before(*archivedAt):
		return StatusArchived
	case endDate != nil && !now.Before(*endDate):
		return StatusEnded
	case !active:
		return StatusPaused
	case now.Before(startDate):
		return StatusScheduled
	}
	return StatusRunning
}

// Service is the campaigns view plus its operations.
type Service struct {
	cat entityref.Catalog
	bil entityref.Billing
	seg entityref.Segments
	mkt entityref.Marketplaces // reserve prices (nil: none)
	now func() time.Time

	campaigns *statelog.Collection[Campaign]
	// bids are keyed by campaign and target (bidKey), not by bid id: a
	// campaign has at most one bid per target, and creating a bid expects
	// the key's current version, so that of two processes creating a bid on
	// the same target at once the log lets exactly one through.
	bids *statelog.Collection[Bid]

	// Secondary indexes, kept by the collections' OnChange hooks. Never call
	// a collection while holding mu (the hooks run under the collection's
	// lock and take mu).
	mu       sync.RWMutex
	byVendor map[string]map[string]map[string]struct{} // mp -> vendor -> campaign ids
	bidsOf   map[string]map[string]map[string]string   // mp -> campaign -> bid id -> bid key
	bidKeyOf map[string]map[string]string              // mp -> bid id -> bid key
	lists    map[string]*listIndex                     // mp -> what the list's filters read, in id order (list.go)
	capped   map[string]int                            // mp -> its campaigns with an active restriction (AnyCapped)

	// spend reads campaigns' spend for their views (nil: never known).
	spend SpendReader
	funds FundsReader
}

const bidType = "campaign_bid"

// bidKey is the entity id of the bid of a campaign on a target.
func bidKey(campaignID, targetType, target string) string {
	sum := sha256.Sum256([]byte(targetType + "\x00" + target))
	return campaignID + ":" + hex.EncodeToString(sum[:16])
}

// TypeCampaign is the campaigns' collection on the entities log.
const TypeCampaign = "campaign"

// New registers the campaign and bid collections on log (call before the
// log runs). The catalog, billing and segments views are read to validate
// references and to compute eligibility and automated bids; the
// marketplaces' reserve prices (mkt, nil for none) to compute eligibility.
func New(log *statelog.Log, cat entityref.Catalog, bil entityref.Billing, seg entityref.Segments, mkt entityref.Marketplaces) *Service {
	s := &Service{
		cat:       cat,
		bil:       bil,
		seg:       seg,
		mkt:       mkt,
		now:       time.Now,
		campaigns: statelog.NewCollection[Campaign](log, TypeCampaign),
		bids:      statelog.NewCollection[Bid](log, bidType),
		byVendor:  map[string]map[string]map[string]struct{}{},
		bidsOf:    map[string]map[string]map[string]string{},
		bidKeyOf:  map[string]map[string]string{},
		lists:     map[string]*listIndex{},
		capped:    map[string]int{},
	}
	s.campaigns.OnChange = s.indexCampaign
	s.bids.OnChange = s.indexBid
	return s
}

func (s *Service) indexCampaign(mp, id string, old, nw *Campaign) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexList(mp, id, nw)
	if was, is := old != nil && old.Capped(), nw != nil && nw.Capped(); was != is {
		if is {
			s.capped[mp]++
		} else if s.capped[mp]--; s.capped[mp] <= 0 {
			delete(s.capped, mp)
		}
	}
	if old != nil && (nw == nil || nw.VendorID != old.VendorID) {
		if m := s.byVendor[mp][old.VendorID]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(s.byVendor[mp], old.VendorID)
			}
		}
	}
	if nw != nil {
		v := s.byVendor[mp]
		if v == nil {
			v = map[string]map[string]struct{}{}
			s.byVendor[mp] = v
		}
		if v[nw.VendorID] == nil {
			v[nw.VendorID] = map[string]struct{}{}
		}
		v[nw.VendorID][id] = struct{}{}
	}
}

func (s *Service) indexBid(mp, key string, old, nw *Bid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil && (nw == nil || nw.ID != old.ID) {
		if m := s.bidsOf[mp][old.CampaignID]; m != nil {
			delete(m, old.ID)
			if len(m) == 0 {
				delete(s.bidsOf[mp], old.CampaignID)
			}
		}
		delete(s.bidKeyOf[mp], old.ID)
	}
	if nw != nil {
		m := s.bidsOf[mp]
		if m == nil {
			m = map[string]map[string]string{}
			s.bidsOf[mp] = m
		}
		if m[nw.CampaignID] == nil {
			m[nw.CampaignID] = map[string]string{}
		}
		m[nw.CampaignID][nw.ID] = key
		k := s.bidKeyOf[mp]
		if k == nil {
			k = map[string]string{}
			s.bidKeyOf[mp] = k
		}
		k[nw.ID] = key
	}
}

// ---- Reads for other components (the auction) ----

// ListenCampaigns and ListenBids register functions called under the
// collections' write locks for every applied campaign or bid change (bids
// by their entity key), for the auction's index. Call them before the log
// runs; fn must not call the Service.
func (s *Service) ListenCampaigns(fn func(mp, id string, old, nw *Campaign)) { s.campaigns.Listen(fn) }

// ListenBids: see ListenCampaigns.
func (s *Service) ListenBids(fn func(mp, key string, old, nw *Bid)) { s.bids.Listen(fn) }

// Campaign returns a campaign of a marketplace and its version.
func (s *Service) Campaign(mp, id string) (Campaign, int64, bool) {
	return s.campaigns.Get(mp, id)
}

// AnyCapped reports whether some campaign of a marketplace has an active
// restriction (Campaign.Capped): without one, nothing of the marketplace
// is counted for the frequency caps.
func (s *Service) AnyCapped(mp string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.capped[mp] > 0
}

// EachCampaign calls fn for every campaign of a marketplace, in no order,
// until fn returns false. It iterates over a snapshot taken first, so fn may
// call any method of the Service (LiveBids, BidsOf, ...).
func (s *Service) EachCampaign(mp string, fn func(Campaign) bool) {
	cs := make([]Campaign, 0, s.campaigns.Len(mp))
	s.campaigns.Each(mp, func(_ string, c Campaign) bool {
		cs = append(cs, c)
		return true
	})
	for _, c := range cs {
		if !fn(c) {
			return
		}
	}
}

// BidsOf returns the stored bids of a (listings or banners) campaign in id
// order, whatever their active flag and eligibility (see Eligibility).
// Automated campaigns have no stored bids: use AutomatedBids or LiveBids.
func (s *Service) BidsOf(mp, campaignID string) []Bid {
	keys := s.bidKeys(mp, campaignID, "")
	out := make([]Bid, 0, len(keys))
	for _, k := range keys {
		if b, _, ok := s.bids.Get(mp, k[1]); ok && b.ID == k[0] {
			out = append(out, b)
		}
	}
	return out
}

// bidKeys returns the (id, key) of a campaign's bids with an id greater
// than after, by id.
func (s *Service) bidKeys(mp, campaignID, after string) [][2]string {
	s.mu.RLock()
	m := s.bidsOf[mp][campaignID]
	out := make([][2]string, 0, len(m))
	for id, key := range m {
		if id > after {
			out = append(out, [2]string{id, key})
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func (s *Service) bidCount(mp, campaignID string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.bidsOf[mp][campaignID])
}

// bidByID returns a bid by its id, with its entity key and version.
func (s *Service) bidByID(mp, bidID string) (Bid, string, int64, bool) {
	s.mu.RLock()
	key, ok := s.bidKeyOf[mp][bidID]
	s.mu.RUnlock()
	if !ok {
		return Bid{}, "", 0, false
	}
	b, v, ok := s.bids.Get(mp, key)
	if !ok || b.ID != bidID {
		return Bid{}, "", 0, false
	}
	return b, key, v, true
}

// LiveBid is a bid that takes part in auctions now.
type LiveBid struct {
	BidID        string // empty for the bids of automated campaigns
	TargetType   string
	Target       string
	AmountMicros int64
}

// LiveBids returns the bids of campaign c that may take part in an auction:
// none unless c is running; for a listings or banners campaign its active
// and eligible bids; for an automated campaign the bids of its strategy on
// the vendor's active products. Budgets are not checked here.
func (s *Service) LiveBids(mp string, c Campaign) []LiveBid {
	if c.Archived() || Status(c, s.now()) != StatusRunning {
		return nil
	}
	var out []LiveBid
	if c.Type == TypeAutomated {
		for _, p := range s.vendorProducts(mp, c.VendorID) {
			if p.Active {
				out = append(out, LiveBid{TargetType: TargetProduct, Target: p.ID, AmountMicros: AutomatedBidMicros(c, p.QualityScore)})
			}
		}
		return out
	}
	for _, b := range s.BidsOf(mp, c.ID) {
		if !b.Active {
			continue
		}
		if ok, _ := s.Eligibility(mp, c, b); ok {
			out = append(out, LiveBid{BidID: b.ID, TargetType: b.TargetType, Target: b.Target, AmountMicros: b.AmountMicros})
		}
	}
	return out
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func notFoundCampaign(id string) error { return validation.NotFoundf("campaign %s", id) }

package campaigns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/storage/statelog"
)

// CampaignInput is the body of a campaign create (POST) or update (PATCH).
// On create an absent field takes its default; on update an absent field is
// left as it is and null clears an optional field.
type CampaignInput struct {
	Name        Opt[string]          `json:"name"`
	Type        Opt[string]          `json:"type"`
	ChargeType  Opt[string]          `json:"chargeType"`
	DailyBudget Opt[json.RawMessage] `json:"dailyBudget"`
	TotalBudget Opt[json.RawMessage] `json:"totalBudget"`
	// Budget is the campaign's budget of a period, {type, amount}: type
	// daily (the same as dailyBudget), weekly or monthly. It replaces the
	// budget of whichever period the campaign had; null removes it.
	Budget    Opt[BudgetInput]     `json:"budget"`
	MaxBid    Opt[json.RawMessage] `json:"maxBid"`
	StartDate Opt[string]          `json:"startDate"`
	EndDate   Opt[string]          `json:"endDate"`
	IsActive  Opt[bool]            `json:"isActive"`
	Targeting Opt[TargetingInput]  `json:"targeting"`
	// VendorID is taken from the path; a body value must name the same vendor.
	VendorID Opt[string] `json:"vendorId"`
	// CapsWithoutShopper: restrictions.go.
	CapsWithoutShopper Opt[string] `json:"capsWithoutShopper"`
}

// TargetingInput is the targeting of a campaign in a request. Like the
// campaign's own fields, a list that is absent is left as it is; null or an
// empty list removes that restriction.
type TargetingInput struct {
	PlacementIDs Opt[[]int]    `json:"placementIds"`
	Devices      Opt[[]string] `json:"devices"`
	Locations    Opt[[]string] `json:"locations"`
	Segments     Opt[[]string] `json:"segments"`
}

// BudgetInput is a campaign's budget of a period in a request.
type BudgetInput struct {
	Type   Opt[string]          `json:"type"`
	Amount Opt[json.RawMessage] `json:"amount"`
}

// Budget periods (BudgetJSON.Type).
const (
	BudgetDaily   = "daily"
	BudgetWeekly  = "weekly"
	BudgetMonthly = "monthly"
)

// BudgetJSON is a campaign's budget of a period on the wire: its period
// and amount.
type BudgetJSON struct {
	Type   string `json:"type"`
	Amount Micros `json:"amount"`
}

// BudgetPeriod is the period of c's budget (BudgetDaily, BudgetWeekly or
// BudgetMonthly) and its amount; "" and 0 when it has none.
func BudgetPeriod(c Campaign) (period string, micros int64) {
	switch {
	case c.WeeklyBudgetMicros != 0:
		return BudgetWeekly, c.WeeklyBudgetMicros
	case c.MonthlyBudgetMicros != 0:
		return BudgetMonthly, c.MonthlyBudgetMicros
	case c.DailyBudgetMicros != 0:
		return BudgetDaily, c.DailyBudgetMicros
	}
	return "", 0
}

func budgetJSON(c Campaign) *BudgetJSON {
	p, m := BudgetPeriod(c)
	if p == "" {
		return nil
	}
	return &BudgetJSON{Type: p, Amount: Micros(m)}
}

// BillingContactInput is the body of PUT .../billing-contact.
type BillingContactInput struct {
	BillingContactID Opt[string] `json:"billingContactId"`
}

// CampaignJSON is a campaign on the wire. StatusReason and Spend are the
// read-time fields of the API's answers (View); JSON leaves them out
// (webhook events).
type CampaignJSON struct {
	ID               string          `json:"id"`
	VendorID         string          `json:"vendorId"`
	Name             string          `json:"name"`
	Type             string          `json:"type"`
	ChargeType       string          `json:"chargeType"`
	DailyBudget      *Micros         `json:"dailyBudget"`
	TotalBudget      *Micros         `json:"totalBudget"`
	Budget           *BudgetJSON     `json:"budget"`
	MaxBid           *Micros         `json:"maxBid"`
	StartDate        timestamp.Time  `json:"startDate"`
	EndDate          *timestamp.Time `json:"endDate"`
	IsActive         bool            `json:"isActive"`
	Status           string          `json:"status"`
	StatusReason     string          `json:"statusReason,omitempty"`
	Spend            *SpendJSON      `json:"spend,omitempty"`
	Targeting        TargetingJSON   `json:"targeting"`
	BillingContactID *string         `json:"billingContactId"`
	CreatedAt        timestamp.Time  `json:"createdAt"`
	UpdatedAt        timestamp.Time  `json:"updatedAt"`
	ArchivedAt       *timestamp.Time `json:"archivedAt"`
	// CapsWithoutShopper is shown when it is not the default (serve).
	CapsWithoutShopper string `json:"capsWithoutShopper,omitempty"`
	// Timetables and NegativeKeywords are shown when the campaign has some
	// (schedule.go).
	Timetables       []TimetableDay    `json:"timetables,omitempty"`
	NegativeKeywords []NegativeKeyword `json:"negativeKeywords,omitempty"`
}

// TargetingJSON is a campaign's targeting on the wire (lists never null).
type TargetingJSON struct {
	PlacementIDs []int    `json:"placementIds"`
	Devices      []string `json:"devices"`
	Locations    []string `json:"locations"`
	Segments     []string `json:"segments"`
}

func optMicros(v int64) *Micros {
	if v == 0 {
		return nil
	}
	m := Micros(v)
	return &m
}

func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// JSON renders c with its status at the current time, without the
// read-time fields statusReason and spend (View has them).
func (s *Service) JSON(c Campaign) CampaignJSON { return jsonAt(c, s.now()) }

// jsonAt renders c with its status at now.
func jsonAt(c Campaign, now time.Time) CampaignJSON {
	out := CampaignJSON{
		ID: c.ID, VendorID: c.VendorID, Name: c.Name, Type: c.Type, ChargeType: c.ChargeType,
		DailyBudget: optMicros(c.DailyBudgetMicros), TotalBudget: optMicros(c.TotalBudgetMicros), Budget: budgetJSON(c), MaxBid: optMicros(c.MaxBidMicros),
		StartDate: timestamp.Of(c.StartDate), IsActive: c.Active, Status: Status(c, now),
		Targeting: TargetingJSON{
			PlacementIDs: orEmpty(c.Targeting.PlacementIDs), Devices: orEmpty(c.Targeting.Devices),
			Locations: orEmpty(c.Targeting.Locations), Segments: orEmpty(c.Targeting.Segments),
		},
		CreatedAt: timestamp.Of(c.CreatedAt), UpdatedAt: timestamp.Of(c.UpdatedAt),
	}
	out.EndDate = timestamp.OptOf(c.EndDate)
	if c.BillingContactID != "" {
		id := c.BillingContactID
		out.BillingContactID = &id
	}
	out.ArchivedAt = timestamp.OptOf(c.ArchivedAt)
	out.CapsWithoutShopper = c.CapsWithoutShopper
	out.Timetables, out.NegativeKeywords = c.Timetables, c.NegativeKeywords
	return out
}

// ParseID checks that a path id is a UUID and returns its canonical form;
// otherwise it returns a 422 error at loc (e.g. "path", "campaign_id").
func ParseID(id string, loc ...any) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", validation.New("uuid_parsing", "Input should be a valid UUID", loc...)
	}
	return u.String(), nil
}

// VendorID returns the catalog id of the vendor that id names: a vendor of
// the catalog by its catalog id or its internal UUID (entityref's
// ResolveVendor), or a catalog id that has campaigns. Otherwise it returns a
// not-found error. Campaigns keep the catalog id.
func (s *Service) VendorID(mp, id string) (string, error) {
	if v, ok := s.cat.ResolveVendor(mp, id); ok {
		return v.ID, nil
	}
	s.mu.RLock()
	known := len(s.byVendor[mp][id]) > 0
	s.mu.RUnlock()
	if known {
		return id, nil
	}
	return "", validation.NotFoundf("vendor %s", id)
}

// CreateCampaign creates a campaign of the vendor vendorID names (its
// catalog id or its UUID; it must exist in the catalog) and returns it with
// its version. The retry of a request with an idempotency key gets the
// campaign its first attempt created.
func (s *Service) CreateCampaign(ctx context.Context, mp, vendorID string, in CampaignInput) (Campaign, int64, error) {
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Campaign{}, 0, err
	}
	if keyed {
		if c, v, ok := s.campaigns.Get(mp, id); ok {
			return c, v, nil
		}
	}
	vendor, ok := s.cat.ResolveVendor(mp, vendorID)
	if !ok {
		return Campaign{}, 0, validation.NotFoundf("vendor %s", vendorID)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	c := Campaign{VendorID: vendor.ID, ChargeType: ChargeCPC, StartDate: now, Active: true, CreatedAt: now, UpdatedAt: now}
	if err := s.apply(mp, &c, in, true); err != nil {
		return Campaign{}, 0, err
	}
	c.ID = id
	v, err := s.campaigns.Put(ctx, mp, c.ID, 0, c)
	if keyed && errors.Is(err, statelog.ErrConflict) {
		return idempotency.Existing(err, func() (Campaign, int64, bool) { return s.campaigns.Get(mp, id) })
	}
	if err != nil {
		return Campaign{}, 0, err
	}
	return c, v, nil
}

// GetCampaign returns a campaign and its version, or a not-found error.
func (s *Service) GetCampaign(mp, id string) (Campaign, int64, error) {
	c, v, ok := s.campaigns.Get(mp, id)
	if !ok {
		return Campaign{}, 0, notFoundCampaign(id)
	}
	return c, v, nil
}

// ListCampaigns returns up to limit campaigns of a vendor (named as VendorID
// takes it) in id (creation) order after the id after, and whether more
// follow.
func (s *Service) ListCampaigns(mp, vendorID, after string, limit int) ([]Campaign, bool, error) {
	vendorID, err := s.VendorID(mp, vendorID)
	if err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	set := s.byVendor[mp][vendorID]
	ids := make([]string, 0, len(set))
	for id := range set {
		if id > after {
			ids = append(ids, id)
		}
	}
	s.mu.RUnlock()
	sort.Strings(ids)
	out := make([]Campaign, 0, min(limit, len(ids)))
	more := false
	for _, id := range ids {
		c, _, ok := s.campaigns.Get(mp, id)
		if !ok {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, c)
	}
	return out, more, nil
}

// UpdateCampaign changes the fields present in in. ifMatch, when not 0, is
// the version the caller read (If-Match); otherwise the version read here is
// expected. A concurrent change of the campaign makes it fail with a
// conflict. An update that changes nothing writes nothing.
func (s *Service) UpdateCampaign(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in CampaignInput) (Campaign, int64, error) {
	cur, ver, err := s.writableCampaign(mp, id, ifMatch)
	if err != nil {
		return Campaign{}, 0, err
	}
	next := cur
	if err := s.apply(mp, &next, in, false); err != nil {
		return Campaign{}, 0, err
	}
	return s.write(ctx, mp, cur, next, ver)
}

func (s *Service) write(ctx context.Context, mp string, cur, next Campaign, ver int64) (Campaign, int64, error) {
	a, _ := json.Marshal(cur)
	b, _ := json.Marshal(next)
	if bytes.Equal(a, b) {
		return cur, ver, nil
	}
	next.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
	v, err := s.campaigns.Put(ctx, mp, next.ID, ver, next)
	if err != nil {
		return Campaign{}, 0, err
	}
	return next, v, nil
}

// SetBillingContact assigns a billing contact to a campaign. The contact
// must exist and be linked to the campaign's vendor; unlinking it later
// leaves the campaign as it is.
func (s *Service) SetBillingContact(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in BillingContactInput) (Campaign, int64, error) {
	cur, ver, err := s.writableCampaign(mp, id, ifMatch)
	if err != nil {
		return Campaign{}, 0, err
	}
	var errs validation.Errors
	contactID := strings.TrimSpace(in.BillingContactID.V)
	switch {
	case !in.BillingContactID.Set:
		errs.Add(validation.Missing, "Field required", "body", "billingContactId")
	case in.BillingContactID.Null:
		errs.Add("string_type", "Input should be a valid string", "body", "billingContactId")
	case contactID == "":
		errs.Add("string_too_short", "String should have at least 1 character", "body", "billingContactId")
	default:
		exists, linked := s.bil.Contact(mp, contactID, cur.VendorID)
		switch {
		case !exists:
			errs.Add(validation.NotFound, "billing contact "+contactID+" not found", "body", "billingContactId")
		case !linked:
			errs.Add(validation.ValueError, "billing contact "+contactID+" is not linked to vendor "+cur.VendorID, "body", "billingContactId")
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, 0, err
	}
	next := cur
	next.BillingContactID = contactID
	return s.write(ctx, mp, cur, next, ver)
}

// apply validates in and applies it to c (create: absent fields keep the
// defaults already in c), then checks the rules that span fields.
func (s *Service) apply(mp string, c *Campaign, in CampaignInput, create bool) error {
	var errs validation.Errors
	bad := map[string]bool{} // fields with an error, to skip the cross-field checks on them
	add := func(field, typ, msg string, loc ...any) {
		bad[field] = true
		errs.Add(typ, msg, append([]any{"body", field}, loc...)...)
	}

	// A body's vendorId may name the vendor either way, as the path does.
	if in.VendorID.Set && (in.VendorID.Null || in.VendorID.V != c.VendorID && in.VendorID.V != vendorid.String(mp, c.VendorID)) {
		add("vendorId", validation.ValueError, "the vendor of a campaign cannot be changed (it is "+c.VendorID+")")
	}

	switch {
	case !in.Name.Set:
		if create {
			add("name", validation.Missing, "Field required")
		}
	case in.Name.Null:
		add("name", "string_type", "Input should be a valid string")
	default:
		name := strings.TrimSpace(in.Name.V)
		switch n := utf8.RuneCountInString(name); {
		case n == 0:
			add("name", "string_too_short", "String should have at least 1 character")
		case n > MaxNameLen:
			add("name", "string_too_long", "String should have at most "+strconv.Itoa(MaxNameLen)+" characters")
		default:
			c.Name = name
		}
	}

	switch {
	case !in.Type.Set:
		if create {
			add("type", validation.Missing, "Field required")
		}
	case in.Type.Null || !oneOf(in.Type.V, TypeListings, TypeBanners, TypeAutomated):
		add("type", "enum", "Input should be 'listings', 'banners' or 'automated'")
	case !create && in.Type.V != c.Type:
		add("type", validation.ValueError, "the type of a campaign cannot be changed (it is "+c.Type+")")
	default:
		c.Type = in.Type.V
	}

	if in.ChargeType.Set {
		ct := strings.ToUpper(strings.TrimSpace(in.ChargeType.V))
		if in.ChargeType.Null || !oneOf(ct, ChargeCPC, ChargeCPM) {
			add("chargeType", "enum", "Input should be 'CPC' or 'CPM'")
		} else {
			c.ChargeType = ct
		}
	}

	money := func(field string, o Opt[json.RawMessage], dst *int64) {
		switch {
		case !o.Set:
		case o.Null:
			*dst = 0
		default:
			if m, ok := parseMoney(o.V, &errs, "body", field); ok {
				*dst = int64(m)
			} else {
				bad[field] = true
			}
		}
	}
	money("dailyBudget", in.DailyBudget, &c.DailyBudgetMicros)
	money("totalBudget", in.TotalBudget, &c.TotalBudgetMicros)
	money("maxBid", in.MaxBid, &c.MaxBidMicros)
	applyBudget(c, in, bad, &errs)

	if in.StartDate.Set {
		if in.StartDate.Null {
			add("startDate", "datetime_type", "Input should be a valid datetime (RFC 3339, with a time zone)")
		} else if t, ok := parseTime(in.StartDate.V); !ok {
			add("startDate", "datetime_parsing", "Input should be a valid datetime (RFC 3339, with a time zone)")
		} else {
			c.StartDate = t
		}
	}
	if in.EndDate.Set {
		if in.EndDate.Null {
			c.EndDate = nil
		} else if t, ok := parseTime(in.EndDate.V); !ok {
			add("endDate", "datetime_parsing", "Input should be a valid datetime (RFC 3339, with a time zone)")
		} else {
			c.EndDate = &t
		}
	}

	if in.IsActive.Set {
		if in.IsActive.Null {
			add("isActive", "bool_type", "Input should be a valid boolean")
		} else {
			c.Active = in.IsActive.V
		}
	}

	if in.Targeting.Set {
		if in.Targeting.Null {
			c.Targeting = Targeting{}
		} else if t, ok := s.targeting(mp, c.Targeting, in.Targeting.V, &errs); ok {
			c.Targeting = t
		}
	}

	// Rules across fields, on the resulting campaign.
	if !bad["type"] && c.Type != "" {
		if c.Type == TypeAutomated {
			if c.DailyBudgetMicros == 0 && !bad["dailyBudget"] {
				add("dailyBudget", validation.Missing, "Field required: an automated campaign needs a dailyBudget (its bids are derived from it)")
			}
		} else {
			if c.MaxBidMicros != 0 && !bad["maxBid"] {
				add("maxBid", validation.ValueError, "maxBid applies only to automated campaigns")
			}
			if period, _ := BudgetPeriod(*c); period == "" && c.TotalBudgetMicros == 0 && !bad["dailyBudget"] && !bad["totalBudget"] && !bad["budget"] {
				add("dailyBudget", validation.Missing, "Field required: a campaign needs a dailyBudget (or a budget of a period), a totalBudget or both")
			}
		}
	}
	if period, m := BudgetPeriod(*c); m != 0 && c.TotalBudgetMicros != 0 && m > c.TotalBudgetMicros && !bad["dailyBudget"] && !bad["totalBudget"] && !bad["budget"] {
		if period == BudgetDaily {
			add("dailyBudget", validation.ValueError, "dailyBudget must be less than or equal to totalBudget")
		} else {
			add("budget", validation.ValueError, "a "+period+" budget must be less than or equal to totalBudget", "amount")
		}
	}
	if c.EndDate != nil && !c.EndDate.After(c.StartDate) && !bad["startDate"] && !bad["endDate"] {
		add("endDate", validation.ValueError, "endDate must be after startDate")
	}
	applyCapsWithoutShopper(c, in.CapsWithoutShopper, &errs)
	return errs.Err()
}

// targeting validates and normalises a targeting input (duplicates removed,
// lists sorted, H3 cells canonical) and merges it into cur: a list that is
// absent stays as it is, null or [] removes the restriction.
func (s *Service) targeting(mp string, cur Targeting, in TargetingInput, errs *validation.Errors) (Targeting, bool) {
	n := len(*errs)
	t := cur
	if in.PlacementIDs.Set {
		t.PlacementIDs = nil
		seen := map[int]bool{}
		for i, p := range in.PlacementIDs.V {
			switch {
			case p < MinPlacementID:
				errs.Add("greater_than_equal", "Input should be greater than or equal to "+strconv.Itoa(MinPlacementID), "body", "targeting", "placementIds", i)
			case p > MaxPlacementID:
				errs.Add("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(MaxPlacementID), "body", "targeting", "placementIds", i)
			case !seen[p]:
				seen[p] = true
				t.PlacementIDs = append(t.PlacementIDs, p)
			}
		}
		sort.Ints(t.PlacementIDs)
	}
	if in.Devices.Set {
		t.Devices = nil
		seen := map[string]bool{}
		for i, d := range in.Devices.V {
			d = strings.ToLower(strings.TrimSpace(d))
			if !oneOf(d, "desktop", "mobile") {
				errs.Add("enum", "Input should be 'desktop' or 'mobile'", "body", "targeting", "devices", i)
			} else if !seen[d] {
				seen[d] = true
				t.Devices = append(t.Devices, d)
			}
		}
		sort.Strings(t.Devices)
	}
	if in.Locations.Set {
		t.Locations = nil
		seen := map[string]bool{}
		if len(in.Locations.V) > MaxLocations {
			errs.Add("too_long", "List should have at most "+strconv.Itoa(MaxLocations)+" items", "body", "targeting", "locations")
		} else {
			for i, l := range in.Locations.V {
				cell, ok := parseH3Cell(l)
				if !ok {
					errs.Add(validation.ValueError, "Input should be a valid H3 cell index (hexadecimal, e.g. 85283473fffffff)", "body", "targeting", "locations", i)
				} else if !seen[cell] {
					seen[cell] = true
					t.Locations = append(t.Locations, cell)
				}
			}
			sort.Strings(t.Locations)
		}
	}
	if in.Segments.Set {
		t.Segments = nil
		seen := map[string]bool{}
		if len(in.Segments.V) > MaxSegments {
			errs.Add("too_long", "List should have at most "+strconv.Itoa(MaxSegments)+" items", "body", "targeting", "segments")
		} else {
			for i, sg := range in.Segments.V {
				sg = strings.TrimSpace(sg)
				switch {
				case sg == "":
					errs.Add("string_too_short", "String should have at least 1 character", "body", "targeting", "segments", i)
				case !s.seg.SegmentExists(mp, sg):
					errs.Add(validation.NotFound, "segment "+sg+" not found", "body", "targeting", "segments", i)
				case !seen[sg]:
					seen[sg] = true
					t.Segments = append(t.Segments, sg)
				}
			}
			sort.Strings(t.Segments)
		}
	}
	return t, len(*errs) == n
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC().Truncate(time.Millisecond), true
}

func oneOf(v string, set ...string) bool {
	for _, x := range set {
		if v == x {
			return true
		}
	}
	return false
}

// applyBudget applies a request's budget of a period ({type, amount}) to c,
// after dailyBudget: it replaces the campaign's daily, weekly or monthly
// budget (a campaign has one budget period), null removes it. A request
// that sets dailyBudget and a budget must give one daily amount: a budget
// of another period beside a dailyBudget, or another daily amount, is
// refused. Problems are added to errs, and their fields marked in bad.
func applyBudget(c *Campaign, in CampaignInput, bad map[string]bool, errs *validation.Errors) {
	add := func(typ, msg string, loc ...any) {
		bad["budget"] = true
		errs.Add(typ, msg, append([]any{"body", "budget"}, loc...)...)
	}
	daily := in.DailyBudget.Set && !in.DailyBudget.Null && !bad["dailyBudget"]
	if !in.Budget.Set {
		if daily {
			c.WeeklyBudgetMicros, c.MonthlyBudgetMicros = 0, 0 // a daily budget is the campaign's period now
		}
		return
	}
	if in.Budget.Null {
		if daily {
			add(validation.ValueError, "budget is null but dailyBudget is set: give one of them")
			return
		}
		c.DailyBudgetMicros, c.WeeklyBudgetMicros, c.MonthlyBudgetMicros = 0, 0, 0
		return
	}
	b := in.Budget.V
	period := ""
	switch {
	case !b.Type.Set:
		add(validation.Missing, "Field required", "type")
	case b.Type.Null || !oneOf(b.Type.V, BudgetDaily, BudgetWeekly, BudgetMonthly):
		add("enum", "Input should be 'daily', 'weekly' or 'monthly'", "type")
	default:
		period = b.Type.V
	}
	var amount int64
	switch {
	case !b.Amount.Set:
		add(validation.Missing, "Field required", "amount")
	case b.Amount.Null:
		add("decimal_type", "Input should be a valid decimal number", "amount")
	default:
		if m, ok := parseMoney(b.Amount.V, errs, "body", "budget", "amount"); ok {
			amount = int64(m)
		} else {
			bad["budget"] = true
		}
	}
	if bad["budget"] {
		return
	}
	if in.DailyBudget.Set && !in.DailyBudget.Null && (period != BudgetDaily || bad["dailyBudget"] || amount != c.DailyBudgetMicros) {
		add(validation.ValueError, "budget and dailyBudget disagree: a campaign has one budget period; give the budget alone, or a daily one of the same amount")
		return
	}
	c.DailyBudgetMicros, c.WeeklyBudgetMicros, c.MonthlyBudgetMicros = 0, 0, 0
	switch period {
	case BudgetDaily:
		c.DailyBudgetMicros = amount
	case BudgetWeekly:
		c.WeeklyBudgetMicros = amount
	case BudgetMonthly:
		c.MonthlyBudgetMicros = amount
	}
}

package campaigns

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// Restrictions are a campaign's frequency caps per shopper: at most Limit
// interactions of one kind (impressions or clicks) of one shopper
// (opaqueUserId) in one period (the marketplace's day, week or month), with
// the campaign as a whole or with each of its bids. A campaign (or bid)
// that reached a cap for a shopper does not take part in that shopper's
// auctions until the period ends (docs/reference/campaigns.md, Restrictions). They are
// stored on the campaign (the entities log: history, replay and the
// campaign.updated webhook come with it) and counted by freqcap.

// The interaction types, frequency types and levels of a restriction type
// (Topsort's names).
const (
	InteractionImpressions = "impressions"
	InteractionClicks      = "clicks"
	InteractionConversions = "conversions"

	FrequencyDaily   = "daily"
	FrequencyWeekly  = "weekly"
	FrequencyMonthly = "monthly"

	LevelCampaign = "campaign"
	LevelBid      = "bid"

	RestrictionActive   = "active"
	RestrictionInactive = "inactive"
)

// The settings of a campaign for the shoppers a cap cannot count (no
// opaqueUserId, personalization consent denied, the counts unreadable).
const (
	CapsServe = "serve" // the campaign competes, uncapped (the default)
	CapsSkip  = "skip"  // the campaign sits the auction out
)

// MaxRestrictionLimit is the highest limit of a restriction.
const MaxRestrictionLimit = 1_000_000

var (
	interactionTypes = []string{InteractionImpressions, InteractionClicks, InteractionConversions}
	frequencyTypes   = []string{FrequencyDaily, FrequencyWeekly, FrequencyMonthly}
	levels           = []string{LevelCampaign, LevelBid}
)

// RestrictionType is one kind of restriction. Its id is fixed:
// 1 + 9·level + 3·interaction + frequency, in the orders of the lists above
// (1 is impressions, daily, campaign).
type RestrictionType struct {
	ID              int    `json:"id"`
	InteractionType string `json:"interactionType"`
	FrequencyType   string `json:"frequencyType"`
	Level           string `json:"level"`
}

// RestrictionTypes lists every restriction type this build counts, by id.
// Conversions are not counted (their ids, 7–9 and 16–18, are refused).
func RestrictionTypes() []RestrictionType {
	var out []RestrictionType
	for l := range levels {
		for i := range interactionTypes {
			if interactionTypes[i] == InteractionConversions {
				continue
			}
			for f := range frequencyTypes {
				out = append(out, RestrictionType{ID: 1 + 9*l + 3*i + f, InteractionType: interactionTypes[i],
					FrequencyType: frequencyTypes[f], Level: levels[l]})
			}
		}
	}
	return out
}

// RestrictionTypeByID returns the restriction type of id, when it is one
// this build counts.
func RestrictionTypeByID(id int) (RestrictionType, bool) {
	for _, t := range RestrictionTypes() {
		if t.ID == id {
			return t, true
		}
	}
	return RestrictionType{}, false
}

// restrictionTypeOf returns the restriction type of the three names.
func restrictionTypeOf(interaction, frequency, level string) (RestrictionType, bool) {
	for _, t := range RestrictionTypes() {
		if t.InteractionType == interaction && t.FrequencyType == frequency && t.Level == level {
			return t, true
		}
	}
	return RestrictionType{}, false
}

// Restriction is one frequency cap of a campaign, as stored on it.
type Restriction struct {
	ID        int64     `json:"id"` // 1, 2, … within the campaign
	TypeID    int       `json:"typeId"`
	Limit     int64     `json:"limit"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Type returns the restriction's type.
func (r Restriction) Type() RestrictionType {
	t, _ := RestrictionTypeByID(r.TypeID)
	return t
}

// RestrictionJSON is a restriction as the API answers it.
type RestrictionJSON struct {
	ID              int64           `json:"id"`
	CampaignID      string          `json:"campaignId"`
	MarketplaceID   string          `json:"marketplaceId"`
	RestrictionType RestrictionType `json:"restrictionType"`
	Limit           int64           `json:"limit"`
	Status          string          `json:"status"`
	CreatedAt       timestamp.Time  `json:"createdAt"`
	UpdatedAt       timestamp.Time  `json:"updatedAt"`
}

// RestrictionJSONOf renders a restriction of campaign c of marketplace mp.
func RestrictionJSONOf(mp string, c Campaign, r Restriction) RestrictionJSON {
	st := RestrictionInactive
	if r.Active {
		st = RestrictionActive
	}
	return RestrictionJSON{ID: r.ID, CampaignID: c.ID, MarketplaceID: mp, RestrictionType: r.Type(), Limit: r.Limit,
		Status: st, CreatedAt: timestamp.Of(r.CreatedAt), UpdatedAt: timestamp.Of(r.UpdatedAt)}
}

// RestrictionInput is the body of a restriction's creation (POST) or update
// (PATCH). A creation names its type by restrictionTypeId, or by the three
// names (interactionType, frequencyType, level); an update changes limit
// and status only.
type RestrictionInput struct {
	RestrictionTypeID Opt[int]    `json:"restrictionTypeId"`
	InteractionType   Opt[string] `json:"interactionType"`
	FrequencyType     Opt[string] `json:"frequencyType"`
	Level             Opt[string] `json:"level"`
	Limit             Opt[int64]  `json:"limit"`
	Status            Opt[string] `json:"status"`
}

// Restrictions returns a campaign's restrictions, by id.
func (s *Service) Restrictions(mp, campaignID string) (Campaign, int64, error) {
	return s.GetCampaign(mp, campaignID)
}

// Restriction returns one restriction of a campaign.
func (s *Service) Restriction(mp, campaignID string, id int64) (Campaign, Restriction, int64, error) {
	c, v, err := s.GetCampaign(mp, campaignID)
	if err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	i := slices.IndexFunc(c.Restrictions, func(r Restriction) bool { return r.ID == id })
	if i < 0 {
		return Campaign{}, Restriction{}, 0, validation.NotFoundf("restriction %d of campaign %s", id, campaignID)
	}
	return c, c.Restrictions[i], v, nil
}

// CreateRestriction adds a restriction to a campaign: one of each type at
// most (a second is refused: change the first). It is active.
func (s *Service) CreateRestriction(ctx context.Context, mp, campaignID string, ifMatch statelog.IfMatch, in RestrictionInput) (Campaign, Restriction, int64, error) {
	cur, ver, err := s.writableCampaign(mp, campaignID, ifMatch)
	if err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	var errs validation.Errors
	t, ok := restrictionTypeIn(in, &errs)
	limit, lok := restrictionLimit(in.Limit, true, &errs)
	if in.Status.Set {
		errs.Add(validation.ValueError, "status is set by PATCH; a new restriction is active", "body", "status")
	}
	if ok && lok {
		if i := slices.IndexFunc(cur.Restrictions, func(r Restriction) bool { return r.TypeID == t.ID }); i >= 0 {
			errs.Add(validation.ValueError, fmt.Sprintf("campaign %s already has a restriction of type %d (restriction %d): change it with PATCH",
				cur.ID, t.ID, cur.Restrictions[i].ID), "body", "restrictionTypeId")
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	r := Restriction{ID: 1, TypeID: t.ID, Limit: limit, Active: true, CreatedAt: now, UpdatedAt: now}
	for _, o := range cur.Restrictions {
		r.ID = max(r.ID, o.ID+1)
	}
	next := cur
	next.Restrictions = append(slices.Clip(slices.Clone(cur.Restrictions)), r)
	c, v, err := s.write(ctx, mp, cur, next, ver)
	if err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	return c, r, v, nil
}

// UpdateRestriction changes a restriction's limit or status (active,
// inactive); its type cannot change.
func (s *Service) UpdateRestriction(ctx context.Context, mp, campaignID string, id int64, ifMatch statelog.IfMatch, in RestrictionInput) (Campaign, Restriction, int64, error) {
	cur, ver, err := s.writableCampaign(mp, campaignID, ifMatch)
	if err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	i := slices.IndexFunc(cur.Restrictions, func(r Restriction) bool { return r.ID == id })
	if i < 0 {
		return Campaign{}, Restriction{}, 0, validation.NotFoundf("restriction %d of campaign %s", id, campaignID)
	}
	var errs validation.Errors
	for _, f := range []struct {
		set  bool
		name string
	}{{in.RestrictionTypeID.Set, "restrictionTypeId"}, {in.InteractionType.Set, "interactionType"},
		{in.FrequencyType.Set, "frequencyType"}, {in.Level.Set, "level"}} {
		if f.set {
			errs.Add(validation.ValueError, "a restriction's type cannot change: create a restriction of the other type", "body", f.name)
		}
	}
	r := cur.Restrictions[i]
	if in.Limit.Set {
		if l, ok := restrictionLimit(in.Limit, true, &errs); ok {
			r.Limit = l
		}
	}
	if in.Status.Set {
		switch {
		case in.Status.Null || !oneOf(in.Status.V, RestrictionActive, RestrictionInactive):
			errs.Add("literal_error", "Input should be 'active' or 'inactive'", "body", "status")
		default:
			r.Active = in.Status.V == RestrictionActive
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	if r == cur.Restrictions[i] {
		return cur, r, ver, nil
	}
	r.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
	next := cur
	next.Restrictions = slices.Clone(cur.Restrictions)
	next.Restrictions[i] = r
	c, v, err := s.write(ctx, mp, cur, next, ver)
	if err != nil {
		return Campaign{}, Restriction{}, 0, err
	}
	return c, r, v, nil
}

// restrictionTypeIn reads the type of a creation: restrictionTypeId, or the
// three names (all of them), not both.
func restrictionTypeIn(in RestrictionInput, errs *validation.Errors) (RestrictionType, bool) {
	named := in.InteractionType.Set || in.FrequencyType.Set || in.Level.Set
	if in.RestrictionTypeID.Set {
		if named {
			errs.Add(validation.ValueError, "give restrictionTypeId or interactionType, frequencyType and level, not both", "body", "restrictionTypeId")
			return RestrictionType{}, false
		}
		if in.RestrictionTypeID.Null {
			errs.Add("int_type", "Input should be a valid integer", "body", "restrictionTypeId")
			return RestrictionType{}, false
		}
		t, ok := RestrictionTypeByID(in.RestrictionTypeID.V)
		if !ok {
			errs.Add(validation.ValueError, restrictionTypeIDMsg(in.RestrictionTypeID.V), "body", "restrictionTypeId")
		}
		return t, ok
	}
	if !named {
		errs.Add(validation.Missing, "Field required: restrictionTypeId, or interactionType, frequencyType and level", "body", "restrictionTypeId")
		return RestrictionType{}, false
	}
	ok := true
	for _, f := range []struct {
		v    Opt[string]
		name string
		set  []string
	}{{in.InteractionType, "interactionType", interactionTypes}, {in.FrequencyType, "frequencyType", frequencyTypes}, {in.Level, "level", levels}} {
		switch {
		case !f.v.Set:
			errs.Add(validation.Missing, "Field required", "body", f.name)
			ok = false
		case f.v.Null || !slices.Contains(f.set, f.v.V):
			errs.Add("literal_error", "Input should be one of "+quoteList(f.set), "body", f.name)
			ok = false
		}
	}
	if !ok {
		return RestrictionType{}, false
	}
	if in.InteractionType.V == InteractionConversions {
		errs.Add(validation.ValueError, "conversions are not counted per shopper by this platform: cap impressions or clicks", "body", "interactionType")
		return RestrictionType{}, false
	}
	return restrictionTypeOf(in.InteractionType.V, in.FrequencyType.V, in.Level.V)
}

func restrictionTypeIDMsg(id int) string {
	if id >= 1 && id <= 18 {
		return fmt.Sprintf("restriction type %d caps conversions, which this platform does not count per shopper: cap impressions or clicks", id)
	}
	return fmt.Sprintf("no restriction type %d: see GET /public/v1/campaign-service/restriction-types", id)
}

// restrictionLimit reads a limit: an integer from 1 to MaxRestrictionLimit.
func restrictionLimit(o Opt[int64], required bool, errs *validation.Errors) (int64, bool) {
	switch {
	case !o.Set:
		if required {
			errs.Add(validation.Missing, "Field required", "body", "limit")
		}
		return 0, false
	case o.Null:
		errs.Add("int_type", "Input should be a valid integer", "body", "limit")
		return 0, false
	case o.V < 1:
		errs.Add("greater_than_equal", "Input should be greater than or equal to 1", "body", "limit")
		return 0, false
	case o.V > MaxRestrictionLimit:
		errs.Add("less_than_equal", fmt.Sprintf("Input should be less than or equal to %d", MaxRestrictionLimit), "body", "limit")
		return 0, false
	}
	return o.V, true
}

// Capped reports whether a campaign has an active restriction.
func (c Campaign) Capped() bool {
	return slices.ContainsFunc(c.Restrictions, func(r Restriction) bool { return r.Active })
}

// applyCapsWithoutShopper sets a campaign's capsWithoutShopper from a
// request: "serve" (stored as the default, empty), "skip", or null (the
// default).
func applyCapsWithoutShopper(c *Campaign, o Opt[string], errs *validation.Errors) {
	switch {
	case !o.Set:
	case o.Null || o.V == CapsServe:
		c.CapsWithoutShopper = ""
	case o.V == CapsSkip:
		c.CapsWithoutShopper = CapsSkip
	default:
		errs.Add("literal_error", "Input should be 'serve' or 'skip'", "body", "capsWithoutShopper")
	}
}

// CapsInteractions reports whether a campaign has an active restriction on
// impressions, on clicks: the interactions freqcap counts for it.
func (c Campaign) CapsInteractions() (impressions, clicks bool) {
	for _, r := range c.Restrictions {
		if r.Active {
			switch r.Type().InteractionType {
			case InteractionImpressions:
				impressions = true
			case InteractionClicks:
				clicks = true
			}
		}
	}
	return impressions, clicks
}

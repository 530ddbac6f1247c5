package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// BidInput is the body of a bid create (POST) or update (PATCH). The target
// of a bid cannot change: on update targetType and target may only repeat
// the bid's own values.
type BidInput struct {
	TargetType Opt[string]          `json:"targetType"`
	Target     Opt[string]          `json:"target"`
	BidAmount  Opt[json.RawMessage] `json:"bidAmount"`
	IsActive   Opt[bool]            `json:"isActive"`
}

// BidJSON is a bid on the wire. isActive is the bid's own switch;
// isEligible says whether it can win an auction now (Eligibility, computed
// at read time from the catalog and the marketplace's reserve prices), and
// when not, ineligibleReason the code and ineligibleMessage the sentence.
type BidJSON struct {
	ID                string         `json:"id"`
	CampaignID        string         `json:"campaignId"`
	TargetType        string         `json:"targetType"`
	Target            string         `json:"target"`
	BidAmount         Micros         `json:"bidAmount"`
	IsActive          bool           `json:"isActive"`
	IsEligible        bool           `json:"isEligible"`
	IneligibleReason  *string        `json:"ineligibleReason"`
	IneligibleMessage *string        `json:"ineligibleMessage"`
	CreatedAt         timestamp.Time `json:"createdAt"`
	UpdatedAt         timestamp.Time `json:"updatedAt"`
	// NegativeKeywords is shown when the bid has some (schedule.go).
	NegativeKeywords []NegativeKeyword `json:"negativeKeywords,omitempty"`
}

// BidJSON renders a bid of campaign c.
func (s *Service) BidJSON(mp string, c Campaign, b Bid) BidJSON {
	ok, why := s.Eligibility(mp, c, b)
	out := BidJSON{
		ID: b.ID, CampaignID: b.CampaignID, TargetType: b.TargetType, Target: b.Target,
		BidAmount: Micros(b.AmountMicros), IsActive: b.Active, IsEligible: ok,
		CreatedAt: timestamp.Of(b.CreatedAt), UpdatedAt: timestamp.Of(b.UpdatedAt), NegativeKeywords: b.NegativeKeywords,
	}
	if !ok {
		out.IneligibleReason, out.IneligibleMessage = &why.Reason, &why.Message
	}
	return out
}

// NormalizeKeyword lower-cases a keyword, trims it and collapses runs of
// white space into one space.
func NormalizeKeyword(k string) string {
	return strings.Join(strings.Fields(strings.ToLower(k)), " ")
}

// CreateBid adds a bid to a listings or banners campaign. A campaign has at
// most one bid per target. The retry of a request with an idempotency key
// gets the bid its first attempt created.
func (s *Service) CreateBid(ctx context.Context, mp, campaignID string, in BidInput) (Campaign, Bid, int64, error) {
	c, _, ok := s.campaigns.Get(mp, campaignID)
	if !ok {
		return Campaign{}, Bid{}, 0, notFoundCampaign(campaignID)
	}
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	created := func() (Bid, int64, bool) {
		b, _, v, ok := s.bidByID(mp, id)
		return b, v, ok && b.CampaignID == campaignID
	}
	if keyed {
		if b, v, ok := created(); ok {
			return c, b, v, nil
		}
	}
	if err := writable(c); err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	if c.Type == TypeAutomated {
		return Campaign{}, Bid{}, 0, validation.New(validation.ValueError,
			"the bids of an automated campaign are chosen by the service: see GET /public/v1/automation/campaigns/"+campaignID+"/bids",
			"path", "campaign_id")
	}
	var errs validation.Errors
	b := Bid{CampaignID: campaignID, Active: true}

	switch {
	case !in.TargetType.Set:
		errs.Add(validation.Missing, "Field required", "body", "targetType")
	case in.TargetType.Null || !oneOf(in.TargetType.V, TargetProduct, TargetCategory, TargetKeyword):
		errs.Add("enum", "Input should be 'product', 'category' or 'keyword'", "body", "targetType")
	default:
		b.TargetType = in.TargetType.V
	}
	switch {
	case !in.Target.Set:
		errs.Add(validation.Missing, "Field required", "body", "target")
	case in.Target.Null:
		errs.Add("string_type", "Input should be a valid string", "body", "target")
	case b.TargetType != "":
		if t, ok := s.bidTarget(mp, c, b.TargetType, in.Target.V, &errs); ok {
			b.Target = t
		}
	}
	switch {
	case !in.BidAmount.Set:
		errs.Add(validation.Missing, "Field required", "body", "bidAmount")
	case in.BidAmount.Null:
		errs.Add("decimal_type", "Input should be a valid decimal number", "body", "bidAmount")
	default:
		if m, ok := parseMoney(in.BidAmount.V, &errs, "body", "bidAmount"); ok {
			b.AmountMicros = int64(m)
		}
	}
	if in.IsActive.Set {
		if in.IsActive.Null {
			errs.Add("bool_type", "Input should be a valid boolean", "body", "isActive")
		} else {
			b.Active = in.IsActive.V
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, Bid{}, 0, err
	}

	// Read the key's version before looking at it: the key may have held a
	// bid that was deleted (its version is then the deletion's, 0 if it
	// never existed), and any creation on the same target after this read,
	// here or in another process, makes the write below fail with a
	// conflict instead of overwriting that bid.
	key := bidKey(campaignID, b.TargetType, b.Target)
	expected := s.bids.Log().Version(bidType, mp+"/"+key)
	if held, _, exists := s.bids.Get(mp, key); exists {
		return Campaign{}, Bid{}, 0, validation.New(validation.ValueError,
			"the campaign already has a bid on this "+b.TargetType+" (bid "+held.ID+"); change that bid instead", "body", "target")
	}
	if s.bidCount(mp, campaignID) >= MaxBidsPerCampaign {
		return Campaign{}, Bid{}, 0, validation.New(validation.ValueError,
			"a campaign has at most "+strconv.Itoa(MaxBidsPerCampaign)+" bids", "path", "campaign_id")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	b.ID, b.CreatedAt, b.UpdatedAt = id, now, now
	v, err := s.bids.Put(ctx, mp, key, expected, b)
	if keyed && errors.Is(err, statelog.ErrConflict) {
		if _, _, ok := s.bids.Get(mp, key); ok {
			if got, v, ok := created(); ok {
				return c, got, v, nil
			}
			return Campaign{}, Bid{}, 0, err // another request's bid on this target
		}
		b, v, err := idempotency.Existing(err, created)
		return c, b, v, err
	}
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	return c, b, v, nil
}

// bidTarget validates and normalises the target of a new bid.
func (s *Service) bidTarget(mp string, c Campaign, typ, raw string, errs *validation.Errors) (string, bool) {
	switch typ {
	case TargetKeyword:
		k := NormalizeKeyword(raw)
		switch n := utf8.RuneCountInString(k); {
		case n == 0:
			errs.Add("string_too_short", "String should have at least 1 character", "body", "target")
		case n > MaxKeywordLen:
			errs.Add("string_too_long", "String should have at most "+strconv.Itoa(MaxKeywordLen)+" characters", "body", "target")
		default:
			return k, true
		}
		return "", false
	}
	t := strings.TrimSpace(raw)
	switch n := utf8.RuneCountInString(t); {
	case n == 0:
		errs.Add("string_too_short", "String should have at least 1 character", "body", "target")
		return "", false
	case n > MaxTargetLen:
		errs.Add("string_too_long", "String should have at most "+strconv.Itoa(MaxTargetLen)+" characters", "body", "target")
		return "", false
	}
	if typ == TargetProduct {
		p, ok := s.cat.Product(mp, t)
		if !ok {
			errs.Add(validation.NotFound, "product "+t+" not found", "body", "target")
			return "", false
		}
		if !p.Vendors.Contains(c.VendorID) {
			errs.Add(validation.ValueError, "vendor "+c.VendorID+" may not promote product "+t+" (it is not among the product's vendors)", "body", "target")
			return "", false
		}
	}
	return t, true
}

// bid returns a bid of a campaign with its entity key and version, or not
// found (also when the bid belongs to another campaign).
func (s *Service) bid(mp, campaignID, bidID string) (Campaign, Bid, string, int64, error) {
	c, _, ok := s.campaigns.Get(mp, campaignID)
	if !ok {
		return Campaign{}, Bid{}, "", 0, notFoundCampaign(campaignID)
	}
	b, key, v, ok := s.bidByID(mp, bidID)
	if !ok || b.CampaignID != campaignID {
		return Campaign{}, Bid{}, "", 0, validation.NotFoundf("bid %s of campaign %s", bidID, campaignID)
	}
	return c, b, key, v, nil
}

// GetBid returns a bid of a campaign with its version.
func (s *Service) GetBid(mp, campaignID, bidID string) (Campaign, Bid, int64, error) {
	c, b, _, v, err := s.bid(mp, campaignID, bidID)
	return c, b, v, err
}

// ListBids returns up to limit bids of a campaign in id (creation) order
// after the id after, and whether more follow.
func (s *Service) ListBids(mp, campaignID, after string, limit int) (Campaign, []Bid, bool, error) {
	c, _, ok := s.campaigns.Get(mp, campaignID)
	if !ok {
		return Campaign{}, nil, false, notFoundCampaign(campaignID)
	}
	out := make([]Bid, 0, limit)
	more := false
	for _, k := range s.bidKeys(mp, campaignID, after) {
		b, _, ok := s.bids.Get(mp, k[1])
		if !ok || b.ID != k[0] {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, b)
	}
	return c, out, more, nil
}

// UpdateBid changes a bid's amount and/or active flag. ifMatch, when not 0,
// is the version the caller read.
func (s *Service) UpdateBid(ctx context.Context, mp, campaignID, bidID string, ifMatch statelog.IfMatch, in BidInput) (Campaign, Bid, int64, error) {
	c, cur, key, ver, err := s.writableBid(mp, campaignID, bidID, ifMatch)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	var errs validation.Errors
	next := cur
	if in.TargetType.Set && (in.TargetType.Null || in.TargetType.V != cur.TargetType) {
		errs.Add(validation.ValueError, "the target of a bid cannot be changed: delete the bid and create another", "body", "targetType")
	}
	if in.Target.Set {
		t := strings.TrimSpace(in.Target.V)
		if cur.TargetType == TargetKeyword {
			t = NormalizeKeyword(in.Target.V)
		}
		if in.Target.Null || t != cur.Target {
			errs.Add(validation.ValueError, "the target of a bid cannot be changed: delete the bid and create another", "body", "target")
		}
	}
	if in.BidAmount.Set {
		if in.BidAmount.Null {
			errs.Add("decimal_type", "Input should be a valid decimal number", "body", "bidAmount")
		} else if m, ok := parseMoney(in.BidAmount.V, &errs, "body", "bidAmount"); ok {
			next.AmountMicros = int64(m)
		}
	}
	if in.IsActive.Set {
		if in.IsActive.Null {
			errs.Add("bool_type", "Input should be a valid boolean", "body", "isActive")
		} else {
			next.Active = in.IsActive.V
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	if next.AmountMicros == cur.AmountMicros && next.Active == cur.Active {
		return c, cur, ver, nil
	}
	next.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
	v, err := s.bids.Put(ctx, mp, key, ver, next)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	return c, next, v, nil
}

// DeleteBid removes a bid of a campaign. ifMatch, when not 0, is the version
// the caller read.
func (s *Service) DeleteBid(ctx context.Context, mp, campaignID, bidID string, ifMatch statelog.IfMatch) error {
	_, _, key, ver, err := s.writableBid(mp, campaignID, bidID, ifMatch)
	if err != nil {
		return err
	}
	return s.bids.Delete(ctx, mp, key, ver)
}

package campaigns

import (
	"context"
	"fmt"

	"github.com/endcap/endcap/storage/statelog"
)

// ImportBatch is the largest batch Import writes at once.
const ImportBatch = 2000

// Import writes campaigns and bids as given, in batches, overwriting
// whatever holds their ids (last writer wins), and returns once this
// process's view applied them. It is the bulk path of tools (benchmarks,
// load-test seeding, migrations from another system): unlike the API it
// checks only the shape (ids, types, charge types, positive amounts, a bid's
// campaign among cs or already known), not references to other areas, and it
// takes no lock. Ids are UUIDs in canonical form, as the API makes them and
// reads them in its paths (and as vendor charges type campaignId).
func (s *Service) Import(ctx context.Context, mp string, cs []Campaign, bs []Bid) error {
	known := make(map[string]string, len(cs)) // campaign id -> type
	cws := make([]statelog.Write[Campaign], 0, min(len(cs), ImportBatch))
	for i, c := range cs {
		switch {
		case c.ID == "" || c.VendorID == "":
			return fmt.Errorf("campaigns: import: campaign %d: id and vendorId are required", i)
		case !canonicalUUID(c.ID):
			return fmt.Errorf("campaigns: import: campaign %d: id %q is not a UUID in canonical form", i, c.ID)
		case c.Type != TypeListings && c.Type != TypeBanners && c.Type != TypeAutomated:
			return fmt.Errorf("campaigns: import: campaign %s: unknown type %q", c.ID, c.Type)
		case c.ChargeType != ChargeCPC && c.ChargeType != ChargeCPM:
			return fmt.Errorf("campaigns: import: campaign %s: unknown charge type %q", c.ID, c.ChargeType)
		}
		known[c.ID] = c.Type
		cws = append(cws, statelog.Write[Campaign]{ID: c.ID, Expected: statelog.AnyVersion, Value: c})
		if len(cws) == ImportBatch {
			if err := s.campaigns.PutMany(ctx, mp, cws); err != nil {
				return err
			}
			cws = cws[:0]
		}
	}
	if len(cws) > 0 {
		if err := s.campaigns.PutMany(ctx, mp, cws); err != nil {
			return err
		}
	}
	bws := make([]statelog.Write[Bid], 0, min(len(bs), ImportBatch))
	for i, b := range bs {
		typ, ok := known[b.CampaignID]
		if !ok {
			c, _, found := s.campaigns.Get(mp, b.CampaignID)
			typ, ok = c.Type, found
		}
		switch {
		case b.ID == "" || !ok:
			return fmt.Errorf("campaigns: import: bid %d: an id and an existing campaign are required", i)
		case !canonicalUUID(b.ID):
			return fmt.Errorf("campaigns: import: bid %d: id %q is not a UUID in canonical form", i, b.ID)
		case typ == TypeAutomated:
			return fmt.Errorf("campaigns: import: bid %s: automated campaigns take no bids", b.ID)
		case b.TargetType != TargetProduct && b.TargetType != TargetCategory && b.TargetType != TargetKeyword:
			return fmt.Errorf("campaigns: import: bid %s: unknown target type %q", b.ID, b.TargetType)
		case b.Target == "" || b.AmountMicros <= 0:
			return fmt.Errorf("campaigns: import: bid %s: a target and a positive amount are required", b.ID)
		}
		if b.TargetType == TargetKeyword {
			b.Target = NormalizeKeyword(b.Target)
		}
		bws = append(bws, statelog.Write[Bid]{ID: bidKey(b.CampaignID, b.TargetType, b.Target), Expected: statelog.AnyVersion, Value: b})
		if len(bws) == ImportBatch {
			if err := s.bids.PutMany(ctx, mp, bws); err != nil {
				return err
			}
			bws = bws[:0]
		}
	}
	if len(bws) > 0 {
		return s.bids.PutMany(ctx, mp, bws)
	}
	return nil
}

// canonicalUUID says whether id is a UUID as ParseID returns it.
func canonicalUUID(id string) bool {
	c, err := ParseID(id)
	return err == nil && c == id
}

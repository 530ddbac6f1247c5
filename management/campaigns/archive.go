package campaigns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// ArchiveCampaign archives a campaign (DELETE): from the moment this
// process's view applies it, the campaign takes part in no auction, and it
// can no longer be changed, nor its bids. Everything else stays: the
// campaign and its bids can be read under their ids (status archived), its
// spend stays in Redis, interactions on ads it won before are still
// charged within its budgets, and reports keep its history. Archiving is
// final and idempotent: archiving an archived campaign writes nothing and
// answers it as it is, whatever ifMatch says. ifMatch, when not 0, is the
// version the caller read.
func (s *Service) ArchiveCampaign(ctx context.Context, mp, id string, ifMatch statelog.IfMatch) (Campaign, int64, error) {
	cur, ver, ok := s.campaigns.Get(mp, id)
	if !ok {
		return Campaign{}, 0, notFoundCampaign(id)
	}
	if cur.Archived() {
		return cur, ver, nil
	}
	if !statelog.Matches(ifMatch, true, ver) {
		return Campaign{}, 0, versionConflict("campaign", id, ver, ifMatch)
	}
	next := cur
	now := s.now().UTC().Truncate(time.Millisecond)
	next.ArchivedAt = &now
	c, v, err := s.write(ctx, mp, cur, next, ver)
	if errors.Is(err, statelog.ErrConflict) {
		// Another request changed it meanwhile: if that was an archive
		// too, this one's answer is the same.
		if got, gv, ok := s.campaigns.Get(mp, id); ok && got.Archived() {
			return got, gv, nil
		}
	}
	return c, v, err
}

// writable returns an error when campaign c cannot be changed: it is
// archived.
func writable(c Campaign) error {
	if !c.Archived() {
		return nil
	}
	return validation.New(validation.ValueError,
		"campaign "+c.ID+" is archived: neither it nor its bids can be changed any more", "path", "campaign_id")
}

// writableCampaign reads a campaign a write may change, with the checks
// every campaign write has: it exists, it is not archived, ifMatch matches
// its version (statelog.Matches).
func (s *Service) writableCampaign(mp, id string, ifMatch statelog.IfMatch) (Campaign, int64, error) {
	cur, ver, ok := s.campaigns.Get(mp, id)
	if !ok {
		return Campaign{}, 0, notFoundCampaign(id)
	}
	if err := writable(cur); err != nil {
		return Campaign{}, 0, err
	}
	if !statelog.Matches(ifMatch, true, ver) {
		return Campaign{}, 0, versionConflict("campaign", id, ver, ifMatch)
	}
	return cur, ver, nil
}

// writableBid is writableCampaign for a bid: its campaign exists and is not
// archived, the bid exists, ifMatch matches the bid's version. It returns
// the bid's key in the log too.
func (s *Service) writableBid(mp, campaignID, bidID string, ifMatch statelog.IfMatch) (Campaign, Bid, string, int64, error) {
	c, b, key, ver, err := s.bid(mp, campaignID, bidID)
	if err == nil {
		err = writable(c)
	}
	if err == nil && !statelog.Matches(ifMatch, true, ver) {
		err = versionConflict("bid", bidID, ver, ifMatch)
	}
	if err != nil {
		return Campaign{}, Bid{}, "", 0, err
	}
	return c, b, key, ver, nil
}

// versionConflict is the error of a write whose If-Match is not the
// version of what it would change.
func versionConflict(what, id string, ver int64, ifMatch statelog.IfMatch) error {
	return fmt.Errorf("%w: %s %s is at version %d, not %d", statelog.ErrConflict, what, id, ver, ifMatch)
}

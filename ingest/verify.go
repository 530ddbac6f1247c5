package ingest

import (
	"errors"
	"strconv"
)

// ErrVerifierUnavailable means resolvedBidIds cannot be checked right now
// (the signing keys are not loaded yet); the request must be retried, not
// rejected.
var ErrVerifierUnavailable = errors.New("resolvedBidId verification unavailable")

// VerifyResolvedBids checks the resolvedBidId of every impression and click
// with verify (signature, key, marketplace). A forged, altered, foreign or
// malformed id rejects the whole request with invalid_resolved_bid_id, naming
// the event by its JSON path. An ErrVerifierUnavailable from verify is
// returned as is.
func VerifyResolvedBids(events []Event, verify func(token string) error) (*ValidationError, error) {
	var n [KindPageView + 1]int
	for i := range events {
		e := &events[i]
		idx := n[e.Kind]
		n[e.Kind]++
		if e.ResolvedBidID == "" {
			continue
		}
		err := verify(e.ResolvedBidID)
		if err == nil {
			continue
		}
		if errors.Is(err, ErrVerifierUnavailable) {
			return nil, err
		}
		arr := "impressions"
		if e.Kind == KindClick {
			arr = "clicks"
		}
		return invalid(CodeInvalidResolvedBidID, arr+"["+strconv.Itoa(idx)+"].resolvedBidId",
			"is not a resolvedBidId issued by this marketplace's auctions"), nil
	}
	return nil, nil
}

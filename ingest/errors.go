package ingest

import "fmt"

// Error codes of /v2 (spec "Error codes" and wire-contract.md).
const (
	CodeBadRequest                     = "bad_request"
	CodeInvalidJSON                    = "invalid_json"
	CodeEmptyRequest                   = "empty_request"
	CodeInvalidEventTime               = "invalid_event_time"
	CodeInvalidOpaqueUserID            = "invalid_opaque_user_id"
	CodeInvalidUseOfExternalCampaignID = "invalid_use_of_external_campaign_id"
	CodeNoPurchaseItems                = "no_purchase_items"
	CodeMissingProductID               = "missing_product_id"
	CodeQuantityNotPositive            = "purchase_item_quantity_less_or_equal_than_zero"
	CodeInvalidResolvedBidID           = "invalid_resolved_bid_id"
)

// ValidationError rejects a whole request: Code is the wire errCode and
// Message names the offending field by its JSON path
// (`impressions[3].opaqueUserId: ...`).
type ValidationError struct {
	Code    string
	Message string
}

func (e *ValidationError) Error() string { return e.Code + ": " + e.Message }

func invalid(code, path, format string, args ...any) *ValidationError {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return &ValidationError{Code: code, Message: msg}
}

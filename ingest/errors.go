package ingest

import "github.com/endcap/endcap/internal/validation"

// Error codes of /v2 (spec "Error codes" and wire-contract.md).
const (
	CodeBadRequest                     = validation.CodeBadRequest
	CodeInvalidJSON                    = validation.CodeInvalidJSON
	CodeEmptyRequest                   = "empty_request"
	CodeInvalidEventTime               = "invalid_event_time"
	CodeInvalidOpaqueUserID            = "invalid_opaque_user_id"
	CodeInvalidUseOfExternalCampaignID = "invalid_use_of_external_campaign_id"
	CodeNoPurchaseItems                = "no_purchase_items"
	CodeMissingProductID               = "missing_product_id"
	CodeQuantityNotPositive            = "purchase_item_quantity_less_or_equal_than_zero"
	CodeInvalidResolvedBidID           = "invalid_resolved_bid_id"
)

// ValidationError rejects a whole request (validation.Rejection: the wire
// errCode and a message naming the field by its JSON path).
type ValidationError = validation.Rejection

var invalid = validation.Reject

package validation

import (
	"fmt"

	"github.com/endcap/endcap/internal/jsontext"
)

// The /v2 error codes both parsers use (the others are their own: spec
// "Error codes", wire-contract.md).
const (
	CodeBadRequest  = "bad_request"
	CodeInvalidJSON = "invalid_json"
)

// Rejection refuses a whole /v2 request (events, auctions): Code is the wire
// errCode and Message names the offending field by its JSON path
// (`impressions[3].opaqueUserId: ...`, `auctions[1].slots: ...`).
type Rejection struct {
	Code    string
	Message string
}

func (e *Rejection) Error() string { return e.Code + ": " + e.Message }

// Reject returns a Rejection with code, whose message is path (when not
// empty), ": " and the formatted message (format as is when there are no
// args).
func Reject(code, path, format string, args ...any) *Rejection {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	if path != "" {
		msg = path + ": " + msg
	}
	return &Rejection{Code: code, Message: msg}
}

// RejectJSON explains why a body that a parser's syntax check refused is
// refused: a syntax error (invalid_json), or a string that the JSON grammar
// accepts and the text rule does not (bad_request naming the field).
func RejectJSON(body []byte) *Rejection {
	r := jsontext.Explain(body)
	if r.Syntax {
		return Reject(CodeInvalidJSON, r.Path, "%s", r.Msg)
	}
	return Reject(CodeBadRequest, r.Path, "%s", r.Msg)
}

// Package consent reads the optional `consent` object of a /v2/events item
// and of a /v2/auctions auction: the shopper's choices as the marketplace's
// consent management platform recorded them, reduced to two flags.
//
//	"consent": {"adStorage": false, "personalization": true}
//
// A flag that is false denies; a flag that is absent or null, and a consent
// object that is absent or null, deny nothing (the marketplace vouches, as
// without the object). When anything is denied the event or auction is kept
// without its opaqueUserId: nothing of it is stored or used per shopper
// (docs/reference/events.md, Consent). Other keys (an IAB TCF or GPP string) are ignored
// as unknown keys are everywhere: Endcap reads no consent string, the
// marketplace's platform decodes it and sets the flags.
package consent

import "github.com/endcap/endcap/internal/jsontext"

// Names of the flags, in the order they are checked.
var names = []string{"adStorage", "personalization"}

// Problem is what is wrong with a consent object: Field is "" for the object
// itself, else the flag's key.
type Problem struct {
	Field, Message string
}

// Denied reads the consent object at sp of a body that s.Valid accepted. An
// absent or null sp denies nothing.
func Denied(s *jsontext.Scanner, sp jsontext.Span) (denied bool, p *Problem) {
	if !s.Present(sp) {
		return false, nil
	}
	if s.B[sp.Lo] != '{' {
		return false, &Problem{"", "must be an object"}
	}
	var f [2]jsontext.Span
	s.Fields(sp.Lo, names, f[:])
	for k, v := range f {
		if !s.Present(v) {
			continue
		}
		switch s.B[v.Lo] {
		case 'f':
			denied = true
		case 't':
		default:
			return false, &Problem{names[k], "must be true or false"}
		}
	}
	return denied, nil
}

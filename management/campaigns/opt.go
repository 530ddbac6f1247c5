package campaigns

import (
	"bytes"
	"encoding/json"
)

// Opt is a request field that tells "absent" from "null" from a value, so
// that PATCH can leave a field alone (absent), clear it (null) or set it.
type Opt[T any] struct {
	Set  bool // the key was present
	Null bool // its value was null
	V    T
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

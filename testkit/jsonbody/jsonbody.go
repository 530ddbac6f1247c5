// Package jsonbody builds the JSON request bodies of table-driven tests:
// an object from raw values by key, a variant of a base object, a quoted
// string, an array made by a function. Its output is deterministic (keys
// in order), so that golden files stay stable.
package jsonbody

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Obj holds raw JSON values by key.
type Obj map[string]string

// With is o with the values of over; a value "-" removes the key.
func (o Obj) With(over Obj) Obj {
	out := Obj{}
	for k, v := range o {
		out[k] = v
	}
	for k, v := range over {
		if v == "-" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// String is the object in JSON, its keys sorted.
func (o Obj) String() string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%q:%s", k, o[k])
	}
	sb.WriteByte('}')
	return sb.String()
}

// Q is s as a JSON string.
func Q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// List is a JSON array of n items made by f.
func List(n int, f func(int) string) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(f(i))
	}
	sb.WriteByte(']')
	return sb.String()
}

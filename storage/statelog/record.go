package statelog

import (
	"encoding/json"

	"github.com/endcap/endcap/internal/jsontext"
)

// A view applies every record of the log at start: ten million of them for
// a catalog of ten million products (docs/design/performance.md, Catalog in
// memory). encoding/json reads a record in two passes over its bytes (one
// to check them, one to decode) and copies its state, where the state is
// most of the record; so the form Log.write writes is read by hand, and
// anything else by encoding/json.

// recordDecoder decodes the log's records (decode). It is used by one
// goroutine at a time: the log's applying one.
type recordDecoder struct {
	sc  jsontext.Scanner // checks the state
	buf []byte           // the texts of the record being read
}

// decode decodes a record. The form Log.write writes (json.Marshal of a
// Record: its keys in order, no white space, "deleted" only when true) is
// read in one pass, but for the state, which is checked as JSON
// (jsontext.Scanner) and not copied: rec.State shares value's bytes. Any
// other JSON, and any the pass cannot read (a string or a state the text
// rule refuses, a number with a fraction), goes to encoding/json, whose
// answer, error or record, is then the answer.
//
// key is "<type>/<id>": rec.Type and rec.ID are parts of it, and rec.WriteID
// shares its allocation (one allocation a record).
func (d *recordDecoder) decode(value []byte) (rec Record, key string, err error) {
	if rec, key, ok := d.written(value); ok {
		return rec, key, nil
	}
	return decodeJSON(value)
}

// decodeJSON is decode by encoding/json (a function of its own, so that
// only this path puts its record on the heap).
func decodeJSON(value []byte) (Record, string, error) {
	var rec Record
	if err := json.Unmarshal(value, &rec); err != nil {
		return Record{}, "", err
	}
	key := rec.Type + "/" + rec.ID
	rec.Type, rec.ID = key[:len(rec.Type)], key[len(rec.Type)+1:]
	return rec, key, nil
}

// written reads the form Log.write writes; ok is false for anything else.
func (d *recordDecoder) written(b []byte) (rec Record, key string, ok bool) {
	r := recordReader{b: b, buf: d.buf[:0]}
	defer func() {
		if cap(r.buf) <= 64<<10 { // a larger one (a record of huge ids) is not kept
			d.buf = r.buf[:0]
		}
	}()
	r.lit(`{"type":`)
	typeLen := r.str()
	r.buf = append(r.buf, '/')
	r.lit(`,"id":`)
	keyLen := typeLen + 1 + r.str()
	r.lit(`,"version":`)
	rec.Version = r.int()
	r.lit(`,"writeId":`)
	r.str()
	r.lit(`,"at":`)
	rec.AtMs = r.int()
	if r.bad {
		return Record{}, "", false
	}
	if r.has(`,"deleted":true`) {
		rec.Deleted = true
	}
	if r.has(`,"state":`) {
		// The state is the rest but the closing brace, with no white space
		// around it (encoding/json's RawMessage would leave that out).
		end := len(b) - 1
		if end <= r.i || b[end] != '}' || isSpace(b[r.i]) || isSpace(b[end-1]) {
			return Record{}, "", false
		}
		state := b[r.i:end]
		valid := d.sc.Valid(state)
		d.sc.Release()
		if !valid {
			return Record{}, "", false
		}
		rec.State = state
	} else if !r.has(`}`) || r.i != len(b) {
		return Record{}, "", false
	}
	all := string(r.buf)
	key = all[:keyLen]
	rec.Type, rec.ID, rec.WriteID = key[:typeLen], key[typeLen+1:], all[keyLen:]
	return rec, key, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// recordReader walks a record: once bad, every step does nothing.
type recordReader struct {
	b   []byte
	i   int
	buf []byte
	bad bool
}

// lit steps over l, which must be next, else the reader is bad.
func (r *recordReader) lit(l string) {
	if !r.has(l) {
		r.bad = true
	}
}

// has steps over l when it is next, and reports whether it was.
func (r *recordReader) has(l string) bool {
	if !r.bad && len(r.b)-r.i >= len(l) && string(r.b[r.i:r.i+len(l)]) == l {
		r.i += len(l)
		return true
	}
	return false
}

// str appends the value of the string that is next to buf and returns its
// length (-1 when there is none, or the text rule refuses it).
func (r *recordReader) str() int {
	if r.bad || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.bad = true
		return -1
	}
	n := len(r.buf)
	out, end, ok := jsontext.DecodeString(r.buf, r.b, r.i)
	if !ok {
		r.bad = true
		return -1
	}
	r.buf, r.i = out, end
	return len(out) - n
}

// int reads the integer that is next: at most 18 digits, so that it
// cannot overflow (a longer one, or one with a fraction or an exponent,
// makes the reader bad: encoding/json reads those).
func (r *recordReader) int() int64 {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return 0
	}
	end, ok := jsontext.ValidNumber(r.b, r.i)
	neg := r.b[r.i] == '-'
	digits := r.b[r.i:end]
	if neg {
		digits = digits[1:]
	}
	if !ok || len(digits) == 0 || len(digits) > 18 {
		r.bad = true
		return 0
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			r.bad = true
			return 0
		}
		v = v*10 + int64(c-'0')
	}
	r.i = end
	if neg {
		return -v
	}
	return v
}

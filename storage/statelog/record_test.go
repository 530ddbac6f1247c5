package statelog

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The record decoder's answer is encoding/json's for every record: those
// Log.write writes (read by hand) and any other (read by encoding/json).
func TestRecordDecoderAgreesWithEncodingJSON(t *testing.T) {
	written := func(r Record) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	state := `{"name":"Blue shirt","active":true,"vendors":["v-1"],"categories":["c-1","c-2"],"priceMicros":990000,"details":{"description":"a \"quoted\" line\nand é","metadata":{"a":[1,2.5,null,true]}}}`
	cases := []struct {
		name string
		rec  string
		hand bool // read by hand, not by encoding/json
	}{
		{"a product", written(Record{Type: "product", ID: "mp/p-1", Version: 3, WriteID: "w-1", AtMs: 1_700_000_000_000, State: json.RawMessage(state)}), true},
		{"a delete", written(Record{Type: "product", ID: "mp/p-1", Version: 4, WriteID: "w-2", AtMs: 5, Deleted: true}), true},
		{"escapes in the ids", written(Record{Type: "bid", ID: "mp/a\"b\\c/é\u2028\t", Version: 1, WriteID: "<w&>", AtMs: 0, State: json.RawMessage(`{"n":1}`)}), true},
		{"a version beyond four bytes, a negative time", written(Record{Type: "t", ID: "m/i", Version: 1<<40 + 3, WriteID: "w", AtMs: -12, State: json.RawMessage(`[]`)}), true},
		{"the largest 18-digit version", written(Record{Type: "t", ID: "m/i", Version: 999_999_999_999_999_999, WriteID: "w", State: json.RawMessage(`1`)}), true},
		{"a scalar state", written(Record{Type: "t", ID: "m/i", Version: 1, WriteID: "w", State: json.RawMessage(`"x"`)}), true},
		{"empty ids", written(Record{Version: 1, State: json.RawMessage(`{}`)}), true},
		{"no state, not deleted", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1}`, true},
		// Not the writer's form: encoding/json reads them.
		{"a 19-digit version", written(Record{Type: "t", ID: "m/i", Version: 1_000_000_000_000_000_000, WriteID: "w", State: json.RawMessage(`1`)}), false},
		{"white space", `{ "type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1} }`, false},
		{"white space around the state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state": {"n":1}}`, false},
		{"white space after the record", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1}}` + "\n", false},
		{"another key order", `{"id":"m/i","type":"t","version":1,"writeId":"w","at":1,"state":{"n":1}}`, false},
		{"a key after the state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1},"x":2}`, false},
		{"a key in capitals", `{"Type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1}}`, false},
		{"a repeated key", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1},"version":7}`, false},
		{"deleted false", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"deleted":false,"state":{"n":1}}`, false},
		{"a null state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":null}`, true},
		{"a NUL in the state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"s":"a\u0000b"}}`, false},
		{"a NUL in the id", `{"type":"t","id":"m/\u0000","version":1,"writeId":"w","at":1,"state":{}}`, false},
		{"invalid UTF-8 in the id", "{\"type\":\"t\",\"id\":\"m/\xff\",\"version\":1,\"writeId\":\"w\",\"at\":1,\"state\":{}}", false},
		{"a version with a fraction", `{"type":"t","id":"m/i","version":1.5,"writeId":"w","at":1,"state":{}}`, false},
		{"a version with an exponent", `{"type":"t","id":"m/i","version":1e3,"writeId":"w","at":1,"state":{}}`, false},
		{"a version too large", `{"type":"t","id":"m/i","version":99999999999999999999,"writeId":"w","at":1,"state":{}}`, false},
		{"a version as a string", `{"type":"t","id":"m/i","version":"1","writeId":"w","at":1,"state":{}}`, false},
		{"a broken state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":}}`, false},
		{"two values as the state", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":1,2}`, false},
		{"cut short", `{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"n":1}`, false},
		{"cut in a number", `{"type":"t","id":"m/i","version":`, false},
		{"not an object", `[1]`, false},
		{"empty", ``, false},
	}
	var d recordDecoder
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want Record
			wantErr := json.Unmarshal([]byte(c.rec), &want)
			got, key, err := d.decode([]byte(c.rec))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, encoding/json's %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if got.Type != want.Type || got.ID != want.ID || got.Version != want.Version || got.WriteID != want.WriteID ||
				got.AtMs != want.AtMs || got.Deleted != want.Deleted || !bytes.Equal(got.State, want.State) || (got.State == nil) != (want.State == nil) {
				t.Fatalf("got %+v (state %q), encoding/json's %+v (state %q)", got, got.State, want, want.State)
			}
			if key != want.Type+"/"+want.ID {
				t.Fatalf("key %q, want %q", key, want.Type+"/"+want.ID)
			}
			if _, _, hand := d.written([]byte(c.rec)); hand != c.hand {
				t.Fatalf("read by hand: %v, want %v", hand, c.hand)
			}
		})
	}
}

// FuzzRecordDecoder: for any bytes, the record decoder answers as
// encoding/json does (go test ./storage/statelog -fuzz FuzzRecordDecoder).
func FuzzRecordDecoder(f *testing.F) {
	for _, r := range []Record{
		{Type: "product", ID: "mp/p-1", Version: 3, WriteID: "w-1", AtMs: 1_700_000_000_000, State: json.RawMessage(`{"name":"x","details":{"a":[1,null]}}`)},
		{Type: "bid", ID: "mp/\"é\u2028", Version: 1 << 40, WriteID: "<&>", AtMs: -1, Deleted: true},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"t","id":"m/i","version":1,"writeId":"w","at":1,"state":{"s":"a\u0000b"}}`))
	f.Add([]byte(`{"type":"t","id":"m/i","version":1.5,"writeId":"w","at":1}`))
	var d recordDecoder
	f.Fuzz(func(t *testing.T, b []byte) {
		var want Record
		wantErr := json.Unmarshal(b, &want)
		got, key, err := d.decode(b)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", b, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.Type != want.Type || got.ID != want.ID || got.Version != want.Version || got.WriteID != want.WriteID ||
			got.AtMs != want.AtMs || got.Deleted != want.Deleted || !bytes.Equal(got.State, want.State) || (got.State == nil) != (want.State == nil) ||
			key != want.Type+"/"+want.ID {
			t.Fatalf("%q: got %+v (key %q), encoding/json's %+v", b, got, key, want)
		}
	})
}

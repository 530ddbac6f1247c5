package jsontext

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestValidMatchesEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	var s Scanner
	for _, b := range []string{
		``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `01`, `-`, `1.`, `.5`, `1.5e`, `1e+`, `1E-7`, `-0.0e0`, `1x`, `+1`,
		`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`, `Infinity`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{a:1}`,
		`{"a":1 "b":2}`, `[1 2]`, `{"a":}`, `{"a"}`, `{,}`, `"\u12"`, `"\u12g4"`, `"\x"`, `"\'"`, "\"\t\"", "\"\x7f\"", "\"\xff\"",
		`"\"`, `"\\"`, `"abc`, `"\u0000"`, `"\\u0000"`, `"\ud800"`, `"\ud800\udc00"`, `"\udc00"`, "\"\xed\xa0\x80\"", "\"é日😀\"", "\"\xc3\"", `{"a":"b"`, `[`, `]`, ` {} `, "\ufeff{}", "{}\x00", `{} {}`, `[1]]`, `{"a":[1,{"b":null}]}`,
		deep(MaxDepth), deep(MaxDepth + 1), "[" + deep(MaxDepth-1) + "," + deep(MaxDepth-1) + "]", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
	} {
		if got, want := s.Valid([]byte(b)), json.Valid([]byte(b)) && TextOK([]byte(b)); got != want {
			t.Errorf("Valid(%.40q) = %v, json.Valid and TextOK = %v", b, got, want)
		}
	}
}

func TestFieldsAndElements(t *testing.T) {
	body := []byte(` {"a" : [1, "x", {"b":[]}, [[]], null] , "\u0063":{"d":true}, "skip":{"e":[{}]}, "a":[ ], "z":"\"}"} `)
	var s Scanner
	if !s.Valid(body) {
		t.Fatal("refused")
	}
	text := func(sp Span) string { return string(body[sp.Lo:sp.Hi]) }
	var f [4]Span
	f[3] = Span{1, 2} // left as it was: no key "missing"
	s.Fields(1, []string{"a", "c", "z", "missing"}, f[:])
	if text(f[0]) != "[ ]" || text(f[1]) != `{"d":true}` || text(f[2]) != `"\"}"` || f[3] != (Span{1, 2}) {
		t.Fatalf("fields %q %q %q %v", text(f[0]), text(f[1]), text(f[2]), f[3])
	}
	a := Span{Lo: strings.Index(string(body), "[1,")}
	a.Hi = s.SkipValue(a.Lo)
	if text(a) != `[1, "x", {"b":[]}, [[]], null]` {
		t.Fatalf("SkipValue: %q", text(a))
	}
	els, over := s.Elements(a.Lo, nil, 5)
	var got []string
	for _, e := range els {
		got = append(got, text(e))
	}
	if over || !reflect.DeepEqual(got, []string{"1", `"x"`, `{"b":[]}`, "[[]]", "null"}) {
		t.Fatalf("elements %q over %v", got, over)
	}
	if els, over := s.Elements(a.Lo, nil, 4); !over || len(els) != 4 {
		t.Fatalf("max 4: %d elements, over %v", len(els), over)
	}
	if els, over := s.Elements(f[0].Lo, nil, 0); over || len(els) != 0 {
		t.Fatalf("empty array: %d elements, over %v", len(els), over)
	}
	if !s.Present(f[1]) || s.Present(Span{}) || s.Present(els[4]) {
		t.Fatal("Present: a value, an absent key, null")
	}
	if v := s.UnquoteTmp(f[2]); string(v) != `"}` {
		t.Fatalf("UnquoteTmp %q", v)
	}
	if v := s.Unquote([]byte("x"), f[2]); string(v) != `x"}` {
		t.Fatalf("Unquote %q", v)
	}
}

// naiveEnds maps the start of every array and object of a valid body to
// the offset past its end, found by reading the bytes.
func naiveEnds(b []byte) map[int]int {
	ends := map[int]int{}
	var stack []int
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = SkipString(b, i) - 1
		case '{', '[':
			stack = append(stack, i)
		case '}', ']':
			ends[stack[len(stack)-1]] = i + 1
			stack = stack[:len(stack)-1]
		}
	}
	return ends
}

// checkSkips asks SkipValue for every container of a body Valid accepted,
// in document order, in reverse, and at random, as the parsers' walks do.
func checkSkips(t *testing.T, s *Scanner, rng *rand.Rand) {
	t.Helper()
	ends := naiveEnds(s.B)
	starts := make([]int, 0, len(ends))
	for lo := range ends {
		starts = append(starts, lo)
	}
	for round := range 3 {
		switch round {
		case 0:
			slices.Sort(starts)
		case 1:
			slices.Sort(starts)
			for i, j := 0, len(starts)-1; i < j; i, j = i+1, j-1 {
				starts[i], starts[j] = starts[j], starts[i]
			}
		case 2:
			rng.Shuffle(len(starts), func(i, j int) { starts[i], starts[j] = starts[j], starts[i] })
		}
		for _, lo := range starts {
			if got := s.SkipValue(lo); got != ends[lo] {
				t.Fatalf("round %d: SkipValue(%d) = %d, want %d in %.200q", round, lo, got, ends[lo], s.B)
			}
		}
	}
}

// walk rebuilds the value at b[i] with the scanner's walking methods, the
// way encoding/json decodes it into an any (numbers as json.Number).
func walk(t *testing.T, s *Scanner, sp Span) any {
	b := s.B
	switch b[sp.Lo] {
	case '{':
		obj := map[string]any{}
		i := SkipWS(b, sp.Lo+1)
		if b[i] == '}' {
			return obj
		}
		for {
			ke := SkipString(b, i)
			key := string(AppendUnquoted(nil, b[i+1:ke-1]))
			var f [1]Span
			s.Fields(sp.Lo, []string{key}, f[:]) // the last of duplicate keys
			obj[key] = walk(t, s, f[0])
			i = SkipWS(b, SkipWS(b, ke)+1)
			i = SkipWS(b, s.SkipValue(i))
			if b[i] == '}' {
				return obj
			}
			i = SkipWS(b, i+1)
		}
	case '[':
		els, over := s.Elements(sp.Lo, nil, 1<<30)
		if over {
			t.Fatal("over")
		}
		arr := []any{}
		for _, e := range els {
			arr = append(arr, walk(t, s, e))
		}
		return arr
	case '"':
		return string(s.UnquoteTmp(sp))
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	return json.Number(b[sp.Lo:sp.Hi])
}

// FuzzScanner: Valid accepts exactly what encoding/json accepts and the text
// rule allows; the walk finds the values encoding/json decodes, and every
// container's end whatever the order of the questions.
func FuzzScanner(f *testing.F) {
	for _, b := range []string{`{"a":[1,{"b":[]}],"a":"x","c":{"d":[[],{}]}}`, `[{"x":1},{"y":[2,3]},[],{}]`, `"\u00e9"`, `1e5`,
		`{"\u0061":{"b":null},"e":[true,false]}`, `{"a":"\ud800"}`, `[[[[[]]]],[[]],[]]`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Scanner
		valid := s.Valid(b)
		if want := json.Valid(b) && TextOK(b); valid != want {
			t.Fatalf("Valid(%q) = %v, json.Valid and TextOK %v", b, valid, want)
		}
		if !valid {
			return
		}
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		lo := SkipWS(b, 0)
		got := walk(t, &s, Span{lo, s.SkipValue(lo)})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("walk %#v, encoding/json %#v for %q", got, want, b)
		}
		checkSkips(t, &s, rand.New(rand.NewPCG(uint64(len(b)), 1)))
	})
}

// TestContainerEnds checks the skips on bodies shaped like the parsers':
// long arrays of objects with nested containers, deep and wide.
func TestContainerEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth == 0 || rng.IntN(4) == 0 {
			return []string{`1`, `"s"`, `null`, `[]`, `{}`}[rng.IntN(5)]
		}
		n := rng.IntN(6)
		parts := make([]string, n)
		if rng.IntN(2) == 0 {
			for i := range parts {
				parts[i] = gen(depth - 1)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		for i := range parts {
			parts[i] = `"k":` + gen(depth-1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var s Scanner
	for range 300 {
		b := []byte(gen(1 + rng.IntN(7)))
		if !s.Valid(b) {
			t.Fatalf("refused %s", b)
		}
		checkSkips(t, &s, rng)
	}
	// Thousands of containers (and brackets in strings): room is made once
	// the brackets are counted.
	for _, b := range []string{
		"[" + strings.Repeat(`{"a":"[{","b":[[]]},`, 3000) + "[]]",
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
	} {
		var s Scanner
		if !s.Valid([]byte(b)) {
			t.Fatalf("refused %.50s", b)
		}
		checkSkips(t, &s, rng)
	}
}

func TestDecodeString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"plain" tail`, "plain", true},
		{`"é\n\u00e9\ud83d\ude00\/"`, "é\n\u00e9😀/", true},
		{`""`, "", true},
		{`"\u0000"`, "", false},
		{`"\ud800"`, "", false},
		{"\"\xff\"", "", false},
		{`"\x"`, "", false},
		{`"open`, "", false},
		{"\"a\tb\"", "", false},
	} {
		out, end, ok := DecodeString([]byte("pre:"), []byte(tc.in), 0)
		if ok != tc.ok || ok && (string(out) != "pre:"+tc.want || end != strings.LastIndexByte(tc.in, '"')+1) || !ok && string(out) != "pre:" {
			t.Errorf("DecodeString(%q) = %q, %d, %v", tc.in, out, end, ok)
		}
	}
}

// TestValidManyContainersAllocatesOnce: past a thousand containers the room
// for the rest is made at once, not by doublings (a 1 MiB body of empty
// arrays would otherwise allocate 44 MB instead of 8.5 MB).
func TestValidManyContainersAllocatesOnce(t *testing.T) {
	body := []byte("[" + strings.Repeat("[],", 300_000) + "[]]")
	allocs := testing.AllocsPerRun(1, func() {
		var s Scanner
		if !s.Valid(body) {
			t.Fatal("refused")
		}
	})
	if allocs > 8 { // 16, 48, 112, 240, 496, 1008, 2032, then all
		t.Fatalf("%v allocations", allocs)
	}
}

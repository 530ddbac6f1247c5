package segments

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/validation"
)

type parsed struct {
	ids      []string
	problems []string // "<line>:<type>"
}

func parseAll(t *testing.T, r io.Reader) (parsed, error) {
	t.Helper()
	var out parsed
	rd := newIDReader(r)
	for {
		id, p, err := rd.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if p != nil {
			fe := p.fieldError()
			out.problems = append(out.problems, fmt.Sprintf("%d:%s", fe.Loc[2], fe.Type))
			continue
		}
		out.ids = append(out.ids, id)
	}
}

func TestIDReader(t *testing.T) {
	long90 := strings.Repeat("é", 90)
	long91 := strings.Repeat("é", 91)
	cases := []struct {
		name string
		in   string
		want parsed
	}{
		{"empty file", "", parsed{}},
		{"one id no newline", "u1", parsed{ids: []string{"u1"}}},
		{"LF", "u1\nu2\n", parsed{ids: []string{"u1", "u2"}}},
		{"CRLF and blanks", "u1\r\n\r\n  \r\nu2\r\n", parsed{ids: []string{"u1", "u2"}}},
		{"whitespace trimmed", "  u1 \t\n\tu2  \r\n", parsed{ids: []string{"u1", "u2"}}},
		{"inner spaces kept", "a b\n", parsed{ids: []string{"a b"}}},
		{"BOM stripped", "\xEF\xBB\xBFu1\nu2", parsed{ids: []string{"u1", "u2"}}},
		{"commas kept without header", "a,b\nc\n", parsed{ids: []string{"a,b", "c"}}},
		{"duplicates kept (Redis dedupes)", "u1\nu1\n", parsed{ids: []string{"u1", "u1"}}},
		{"90 characters", long90, parsed{ids: []string{long90}}},
		{"91 characters", "ok\n" + long91 + "\nok2", parsed{ids: []string{"ok", "ok2"}, problems: []string{"2:too_long"}}},
		{"invalid UTF-8", "a\n\xff\xfe\n", parsed{ids: []string{"a"}, problems: []string{"2:invalid"}}},
		{"csv header", "opaqueUserId\nu1\nu2\n", parsed{ids: []string{"u1", "u2"}}},
		{"csv header case and BOM", "\xEF\xBB\xBFOPAQUEUSERID,email\r\nu1,a@b\r\n", parsed{ids: []string{"u1"}}},
		{"csv header after blank lines", "\n\nopaqueUserId\nu1", parsed{ids: []string{"u1"}}},
		{"csv quoted header and fields", "\"opaqueUserId\",x\n\"u,1\",2\n\"u\"\"2\"\n u3 ,z\n", parsed{ids: []string{"u,1", "u\"2", "u3"}}},
		{"csv empty first column", "opaqueUserId,x\n,1\nu1,2\n", parsed{ids: []string{"u1"}, problems: []string{"2:too_short"}}},
		{"csv unclosed quote", "opaqueUserId\n\"u1\n", parsed{problems: []string{"2:invalid"}}},
		{"header only first line", "u0\nopaqueUserId\n", parsed{ids: []string{"u0", "opaqueUserId"}}},
		{"line too long", "a\n" + strings.Repeat("x", MaxLineBytes+10) + "\nb\n", parsed{ids: []string{"a", "b"}, problems: []string{"2:too_long"}}},
		{"line too long at the end", "a\n" + strings.Repeat("x", MaxLineBytes+10), parsed{ids: []string{"a"}, problems: []string{"2:too_long"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAll(t, strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFirstCSVField(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"a,b", "a", true},
		{"a", "a", true},
		{`"a,b",c`, "a,b", true},
		{`"a""b"`, `a"b`, true},
		{`""`, "", true},
		{`"a`, "", false},
		{`  "a" ,b`, "a", true},
	}
	for _, tc := range cases {
		got, ok := firstCSVField([]byte(tc.in))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("firstCSVField(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOpenFile(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("u1\nu2\n"))
	_ = zw.Close()

	t.Run("plain", func(t *testing.T) {
		r, err := openFile(strings.NewReader("u1\nu2\n"), 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseAll(t, r)
		if err != nil || !reflect.DeepEqual(got.ids, []string{"u1", "u2"}) {
			t.Fatalf("%v %v", got, err)
		}
	})
	t.Run("gzip", func(t *testing.T) {
		r, err := openFile(bytes.NewReader(gz.Bytes()), 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseAll(t, r)
		if err != nil || !reflect.DeepEqual(got.ids, []string{"u1", "u2"}) {
			t.Fatalf("%v %v", got, err)
		}
	})
	t.Run("plain too large", func(t *testing.T) {
		r, err := openFile(strings.NewReader(strings.Repeat("u\n", 100)), 100)
		if err == nil {
			_, err = parseAll(t, r)
		}
		if !errors.Is(err, ErrFileTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("exactly the limit", func(t *testing.T) {
		r, err := openFile(strings.NewReader(strings.Repeat("u\n", 50)), 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseAll(t, r)
		if err != nil || len(got.ids) != 50 {
			t.Fatalf("%d ids, %v", len(got.ids), err)
		}
	})
	t.Run("gzip bomb capped", func(t *testing.T) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(bytes.Repeat([]byte("u\n"), 10000))
		_ = zw.Close()
		if b.Len() > 1000 {
			t.Fatalf("compressed %d bytes", b.Len())
		}
		r, err := openFile(&b, 1000)
		if err == nil {
			_, err = parseAll(t, r)
		}
		if !errors.Is(err, ErrFileTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("corrupt gzip", func(t *testing.T) {
		bad := append([]byte{}, gz.Bytes()...)
		bad[len(bad)-5] ^= 0xff // damage the CRC
		r, err := openFile(bytes.NewReader(bad), 100)
		if err == nil {
			_, err = parseAll(t, r)
		}
		if !errors.Is(err, errBadGzip) {
			t.Fatalf("err = %v", err)
		}
		if v, ok := validation.As(fileError(err)); !ok || v[0].Loc[1] != "file" {
			t.Fatalf("fileError = %v", fileError(err))
		}
	})
}

func TestParseAction(t *testing.T) {
	for in, want := range map[string]Action{"": ActionAdd, "add": ActionAdd, "remove": ActionRemove, "replace": ActionReplace} {
		if got, err := ParseAction(in); err != nil || got != want {
			t.Errorf("ParseAction(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"ADD", "delete", " add"} {
		if _, err := ParseAction(in); err == nil {
			t.Errorf("ParseAction(%q) accepted", in)
		}
	}
}

func TestValidateInput(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		in   Input
		locs []string
	}{
		{"ok", Input{Name: str("n")}, nil},
		{"missing name", Input{}, []string{"body.name:missing"}},
		{"blank name", Input{Name: str("  ")}, []string{"body.name:too_short"}},
		{"long name", Input{Name: str(strings.Repeat("n", 256))}, []string{"body.name:too_long"}},
		{"long description", Input{Name: str("n"), Description: str(strings.Repeat("d", 1001))}, []string{"body.description:too_long"}},
		{"config without type", Input{Name: str("n"), Config: &ConfigInput{}}, []string{"body.config.type:missing"}},
		{"config other type", Input{Name: str("n"), Config: &ConfigInput{Type: str("rule")}}, []string{"body.config.type:literal_error"}},
	}
	for _, tc := range cases {
		_, err := validateInput(tc.in)
		var got []string
		if v, ok := validation.As(err); ok {
			for _, fe := range v {
				parts := make([]string, len(fe.Loc))
				for i, l := range fe.Loc {
					parts[i] = l.(string)
				}
				got = append(got, strings.Join(parts, ".")+":"+fe.Type)
			}
		}
		if !reflect.DeepEqual(got, tc.locs) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.locs)
		}
	}
}

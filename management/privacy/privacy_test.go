package privacy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/validation"
)

func TestValidate(t *testing.T) {
	ids := func(n int) *[]string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("u", i)
		}
		return &out
	}
	list := func(s ...string) *[]string { return &s }
	cases := []struct {
		name string
		in   *[]string
		want []string // ids kept, or nil when invalid
		locs []string // "loc:type" of the errors
	}{
		{"absent", nil, nil, []string{"body.opaqueUserIds:missing"}},
		{"empty list", list(), nil, []string{"body.opaqueUserIds:too_short"}},
		{"too many", ids(MaxIDsPerRequest + 1), nil, []string{"body.opaqueUserIds:too_long"}},
		{"the most", ids(MaxIDsPerRequest), *ids(MaxIDsPerRequest), nil},
		{"empty id", list("a", ""), nil, []string{"body.opaqueUserIds.1:too_short"}},
		{"too long", list(strings.Repeat("é", MaxOpaqueUserIDLen+1), strings.Repeat("é", MaxOpaqueUserIDLen)), nil, []string{"body.opaqueUserIds.0:too_long"}},
		{"longest", list(strings.Repeat("é", MaxOpaqueUserIDLen)), []string{strings.Repeat("é", MaxOpaqueUserIDLen)}, nil},
		{"not UTF-8", list("\xff"), nil, []string{"body.opaqueUserIds.0:invalid"}},
		{"duplicates", list("b", "a", "b"), []string{"b", "a"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Validate(Input{OpaqueUserIDs: c.in})
			var locs []string
			if v, ok := validation.As(err); ok {
				for _, e := range v {
					parts := make([]string, len(e.Loc))
					for i, l := range e.Loc {
						parts[i] = fmt.Sprint(l)
					}
					locs = append(locs, strings.Join(parts, ".")+":"+e.Type)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(locs) != fmt.Sprint(c.locs) || fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v %v, want %v %v", got, locs, c.want, c.locs)
			}
		})
	}
}

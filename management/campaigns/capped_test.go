package campaigns

import "testing"

// TestAnyCapped: a marketplace counts its campaigns with an active
// restriction as the log applies their changes (created, restricted,
// restriction turned off, deleted), each marketplace apart.
func TestAnyCapped(t *testing.T) {
	s := &Service{byVendor: map[string]map[string]map[string]struct{}{}, lists: map[string]*listIndex{}, capped: map[string]int{}}
	plain := &Campaign{ID: "c-1", VendorID: "v-1"}
	capped := &Campaign{ID: "c-1", VendorID: "v-1", Restrictions: []Restriction{{ID: 1, TypeID: 1, Limit: 3, Active: true}}}
	off := &Campaign{ID: "c-1", VendorID: "v-1", Restrictions: []Restriction{{ID: 1, TypeID: 1, Limit: 3}}}
	other := &Campaign{ID: "c-2", VendorID: "v-1", Restrictions: []Restriction{{ID: 1, TypeID: 1, Limit: 3, Active: true}}}
	steps := []struct {
		name    string
		mp, id  string
		old, nw *Campaign
		a, b    bool // AnyCapped of mp-a and mp-b after the step
	}{
		{"a campaign without restrictions", "mp-a", "c-1", nil, plain, false, false},
		{"restricted", "mp-a", "c-1", plain, capped, true, false},
		{"another campaign restricted", "mp-a", "c-2", nil, other, true, false},
		{"the first one's restriction turned off", "mp-a", "c-1", capped, off, true, false},
		{"a restricted campaign of another marketplace", "mp-b", "c-2", nil, other, true, true},
		{"the other restricted one deleted", "mp-a", "c-2", other, nil, false, true},
		{"changed again without a restriction", "mp-a", "c-1", off, plain, false, true},
	}
	for _, st := range steps {
		s.indexCampaign(st.mp, st.id, st.old, st.nw)
		if a, b := s.AnyCapped("mp-a"), s.AnyCapped("mp-b"); a != st.a || b != st.b {
			t.Errorf("%s: AnyCapped %v, %v; want %v, %v", st.name, a, b, st.a, st.b)
		}
	}
}

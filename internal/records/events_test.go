package records

import "testing"

// TestEventKey: a user's events share a key (one partition, in order); an
// event without a user is keyed by its id, so that such events spread over
// the partitions while the copies of one event share a key.
func TestEventKey(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{MarketplaceID: "mp", ID: "e1", OpaqueUserID: "u1"}, "mp|u1"},
		{Event{MarketplaceID: "mp", ID: "e2", OpaqueUserID: "u1"}, "mp|u1"},
		{Event{MarketplaceID: "mp", ID: "e1"}, "mp#e1"},
		{Event{MarketplaceID: "mp", ID: "e2"}, "mp#e2"},
	}
	for _, tc := range tests {
		if got := string(EventKey(&tc.e)); got != tc.want {
			t.Errorf("EventKey(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

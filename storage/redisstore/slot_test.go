package redisstore

import "testing"

// TestSlot: the slots Redis Cluster gives these keys (CLUSTER KEYSLOT on
// Redis 7.0), hash tags included.
func TestSlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int
	}{
		{"", 0},
		{"foo", 12182},
		{"123456789", 12739}, // CRC16/XMODEM check value 0x31c3
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{}{bar}", 8363}, // empty first tag: the whole key
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"{bar", 4015}, // no closing brace: the whole key
		{"}{a}", 15495},
		{"ec:spend:{mp:c}", 3783},
		{"ec:cm:{mp:c}:1:0", 3783},
	} {
		if got := Slot(c.key); got != c.want {
			t.Errorf("Slot(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

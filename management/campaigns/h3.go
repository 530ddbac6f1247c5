package campaigns

import (
	"strconv"
	"strings"

	"github.com/uber/h3-go/v4"
)

// parseH3Cell parses an H3 cell index in its usual text form (hexadecimal,
// e.g. "85283473fffffff"; case-insensitive, an optional 0x prefix), checks it
// is a valid cell with the H3 library, and returns its canonical form
// (lower-case hexadecimal without prefix).
func parseH3Cell(s string) (string, bool) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	if t == "" || len(t) > 16 {
		return "", false
	}
	h, err := strconv.ParseUint(t, 16, 64)
	if err != nil || !isValidH3Cell(h) {
		return "", false
	}
	return strconv.FormatUint(h, 16), true
}

func isValidH3Cell(h uint64) bool { return h3.Cell(h).IsValid() }

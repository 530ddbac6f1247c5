package campaigns

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/endcap/endcap/validation"
)

// Micros is an amount of money in micro-units (1/1 000 000) of the
// marketplace currency. On the wire it is a decimal number.
type Micros int64

// MicrosPerUnit is the number of micro-units in one currency unit.
const MicrosPerUnit = 1_000_000

// MaxMoney is the largest amount (in currency units) a budget or a bid may
// have.
const MaxMoney = 1_000_000_000

// MarshalJSON writes the amount as an exact decimal number.
func (m Micros) MarshalJSON() ([]byte, error) { return []byte(m.String()), nil }

// String is the exact decimal text of the amount, without trailing zeros.
func (m Micros) String() string {
	neg := m < 0
	u := uint64(m)
	if neg {
		u = uint64(-m)
	}
	s := strconv.FormatUint(u/MicrosPerUnit, 10)
	if frac := u % MicrosPerUnit; frac != 0 {
		f := strconv.FormatUint(frac+MicrosPerUnit, 10)[1:] // zero-padded to 6 digits
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// parseMoney converts a JSON number (its exact text, never a float) to
// micro-units. It requires 0 < amount <= MaxMoney and at most 6 decimal
// places, and adds an error at loc otherwise.
func parseMoney(raw json.RawMessage, errs *validation.Errors, loc ...any) (Micros, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		errs.Add("decimal_type", "Input should be a valid decimal number", loc...)
		return 0, false
	}
	// The JSON decoder has checked the number grammar; bound the size so that
	// an exponent like 1e999999999 cannot make big.Rat allocate a huge value.
	if len(s) > 64 {
		errs.Add("decimal_max_digits", "Input should have at most 64 characters", loc...)
		return 0, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > 64 || e < -64 {
			errs.Add(validation.ValueError, "Input should be less than or equal to "+strconv.Itoa(MaxMoney), loc...)
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		errs.Add("decimal_type", "Input should be a valid decimal number", loc...)
		return 0, false
	}
	if r.Sign() <= 0 {
		errs.Add("greater_than", "Input should be greater than 0", loc...)
		return 0, false
	}
	if r.Cmp(new(big.Rat).SetInt64(MaxMoney)) > 0 {
		errs.Add("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(MaxMoney), loc...)
		return 0, false
	}
	r.Mul(r, new(big.Rat).SetInt64(MicrosPerUnit))
	if !r.IsInt() {
		errs.Add("decimal_max_places", "Input should have no more than 6 decimal places", loc...)
		return 0, false
	}
	return Micros(r.Num().Int64()), true
}

// ParseMoneyText converts a decimal amount in currency units ("0.05") to
// micro-units with the rules of parseMoney (0 < amount <= MaxMoney, at most
// 6 decimal places).
func ParseMoneyText(s string) (int64, error) {
	var errs validation.Errors
	m, ok := parseMoney(json.RawMessage(s), &errs, "amount")
	if !ok {
		return 0, errs.Err()
	}
	return int64(m), nil
}

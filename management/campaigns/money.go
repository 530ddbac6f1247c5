package campaigns

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/validation"
)

// Micros is an amount of money in micro-units of the marketplace currency
// (money.Micros: a decimal number on the wire).
type Micros = money.Micros

// MicrosPerUnit is the number of micro-units in one currency unit.
const MicrosPerUnit = money.PerUnit

// MaxMoney is the largest amount (in currency units) a budget or a bid may
// have.
const MaxMoney = 1_000_000_000

// parseMoney converts a JSON number (its exact text, never a float) to
// micro-units, exactly (money.Exact: a vendor's bid or budget is never
// rounded). It requires 0 < amount <= MaxMoney and at most 6 decimal
// places, and adds an error at loc otherwise.
func parseMoney(raw json.RawMessage, errs *validation.Errors, loc ...any) (Micros, bool) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		errs.Add("decimal_type", "Input should be a valid decimal number", loc...)
		return 0, false
	}
	if end, ok := jsontext.ValidNumber(b, 0); !ok || end != len(b) {
		errs.Add("decimal_type", "Input should be a valid decimal number", loc...)
		return 0, false
	}
	if len(b) > 64 {
		errs.Add("decimal_max_digits", "Input should have at most 64 characters", loc...)
		return 0, false
	}
	m, problem := money.Parse(b, money.Exact, MaxMoney*money.PerUnit)
	switch problem {
	case money.NotPositive:
		errs.Add("greater_than", "Input should be greater than 0", loc...)
	case money.TooLarge:
		errs.Add("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(MaxMoney), loc...)
	case money.TooPrecise, money.TooSmall:
		errs.Add("decimal_max_places", "Input should have no more than 6 decimal places", loc...)
	}
	return m, problem == money.OK
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

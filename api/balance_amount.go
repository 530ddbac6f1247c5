package api

import (
	"encoding/json"
	"strings"

	"github.com/endcap/endcap/internal/validation"
)

// BalanceAmount reads an amount as the balance routes read their bodies'
// (a top-up's balance, a credit limit; zero: 0 is allowed), from the text
// of a form's field: the web console's balance forms refuse what the
// routes refuse, with the same errors (loc body.<field>).
func BalanceAmount(text, field string, zero bool) (int64, error) {
	var errs validation.Errors
	raw := json.RawMessage(strings.TrimSpace(text))
	if len(raw) > 0 && (!json.Valid(raw) || raw[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw[0] == 't' || raw[0] == 'f' || raw[0] == 'n') {
		errs.Add("type_error.number", "value is not a valid number", "body", field)
		return 0, errs.Err()
	}
	m := amountField(raw, field, zero, &errs)
	return m, errs.Err()
}

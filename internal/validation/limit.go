package validation

import "strconv"

// QueryLimit reads a list's `limit` query value s (present: the query has
// it): a whole number from 1 to max. It returns def when the query has none,
// and def with the problem added to errs when s is not such a number.
func QueryLimit(errs *Errors, s string, present bool, def, max int) int {
	if !present {
		return def
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		errs.Add("int_parsing", "Input should be a valid integer", "query", "limit")
	case n < 1:
		errs.Add("greater_than_equal", "Input should be greater than or equal to 1", "query", "limit")
	case n > max:
		errs.Add("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(max), "query", "limit")
	default:
		return n
	}
	return def
}

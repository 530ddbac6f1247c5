package exports

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Limits of a request (spec: exports).
const (
	MaxDimensions = 27
	MaxMetrics    = 19
	MaxWindowDays = 31  // endDate − startDate + 1
	MaxAgeDays    = 120 // startDate ≥ today (UTC) − 120 days
)

// Request is the body of POST /export-service/exports.
type Request struct {
	Dataset     string   `json:"dataset"`
	Dimensions  []string `json:"dimensions"`
	Metrics     []string `json:"metrics"`
	Granularity string   `json:"granularity"`
	StartDate   string   `json:"startDate"`
	EndDate     string   `json:"endDate"`
	Format      string   `json:"format,omitempty"`
}

// Error codes of the exports API (docs/reference/exports.md). Each is the `code` of
// the error body and of its details.
const (
	CodeInvalidRequest    = "invalid_request"    // not a JSON object, or a field of the wrong type
	CodeInvalidDataset    = "invalid_dataset"    // missing or not a dataset
	CodeInvalidDimensions = "invalid_dimensions" // none, or more than 27
	CodeDuplicate         = "duplicate_value"    // a dimension or metric given twice
	CodeUnknownDimension  = "unknown_dimension"
	CodeInvalidMetrics    = "invalid_metrics" // none, or more than 19
	CodeUnknownMetric     = "unknown_metric"
	CodeInvalidGranular   = "invalid_granularity"
	CodeInvalidDate       = "invalid_date"       // missing or not YYYY-MM-DD
	CodeStartTooOld       = "start_date_too_old" // more than 120 days before today (UTC)
	CodeStartInFuture     = "start_date_in_future"
	CodeEndBeforeStart    = "end_date_before_start_date"
	CodeWindowTooLong     = "date_range_too_long" // more than 31 days
	CodeInvalidFormat     = "invalid_format"
	CodeQuotaExceeded     = "quota_exceeded"
	CodeNotFound          = "export_not_found"
	CodeUnavailable       = "service_unavailable"
	CodeInternal          = "internal_error"
)

// Problem is one thing wrong with a request: an entry of the error's details.
type Problem struct {
	Code    string `json:"code"`
	Field   string `json:"field"`
	Message string `json:"message"`
	Value   any    `json:"value,omitempty"`
}

// DecodeRequest reads a request body. A body that is not a JSON object, or
// whose fields have the wrong types, is one problem per field.
func DecodeRequest(body []byte) (Request, []Problem) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return Request{}, []Problem{{Code: CodeInvalidRequest, Field: "body", Message: "The body must be a JSON object."}}
	}
	var r Request
	var probs []Problem
	str := func(name string, dst *string) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			probs = append(probs, Problem{Code: CodeInvalidRequest, Field: name, Message: name + " must be a string."})
		}
	}
	list := func(name string, dst *[]string) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			probs = append(probs, Problem{Code: CodeInvalidRequest, Field: name, Message: name + " must be an array of strings."})
		}
	}
	str("dataset", &r.Dataset)
	list("dimensions", &r.Dimensions)
	list("metrics", &r.Metrics)
	str("granularity", &r.Granularity)
	str("startDate", &r.StartDate)
	str("endDate", &r.EndDate)
	str("format", &r.Format)
	return r, probs
}

// Validate checks every rule of the spec against today (UTC) and returns
// every problem found, in field order. It fills the default format.
func (r *Request) Validate(now time.Time) []Problem {
	var probs []Problem
	add := func(code, field, msg string, v any) {
		probs = append(probs, Problem{Code: code, Field: field, Message: msg, Value: v})
	}
	ds, ok := DatasetByName(r.Dataset)
	if !ok {
		add(CodeInvalidDataset, "dataset", datasetMessage, nilIfEmpty(r.Dataset))
		ds = monitoringMetrics // check the rest against the one dataset
	}
	names := func(field string, vals []string, max int, countCode, unknownCode, what string, known func(string) bool) {
		if len(vals) == 0 || len(vals) > max {
			add(countCode, field, fmt.Sprintf("%s must hold 1 to %d %s; it holds %d.", field, max, what, len(vals)), nil)
		}
		seen := make(map[string]int, len(vals))
		for i, v := range vals {
			f := field + "[" + strconv.Itoa(i) + "]"
			if j, dup := seen[v]; dup {
				add(CodeDuplicate, f, fmt.Sprintf("%q is already %s[%d]; each value may appear once.", v, field, j), v)
				continue
			}
			seen[v] = i
			if !known(v) {
				add(unknownCode, f, fmt.Sprintf("%q is not a %s of dataset %s (GET /public/v1/export-service/datasets lists them).", v, what[:len(what)-1], ds.Name), v)
			}
		}
	}
	names("dimensions", r.Dimensions, MaxDimensions, CodeInvalidDimensions, CodeUnknownDimension, "dimensions",
		func(s string) bool { _, ok := ds.Dimension(s); return ok })
	names("metrics", r.Metrics, MaxMetrics, CodeInvalidMetrics, CodeUnknownMetric, "metrics",
		func(s string) bool { _, ok := ds.Metric(s); return ok })
	grOK := false
	for _, g := range ds.Granularities {
		grOK = grOK || g == r.Granularity
	}
	if !grOK {
		add(CodeInvalidGranular, "granularity", fmt.Sprintf("granularity must be one of %q.", ds.Granularities), nilIfEmpty(r.Granularity))
	}
	today := dateOf(now.UTC())
	start, serr := parseDate(r.StartDate)
	end, eerr := parseDate(r.EndDate)
	if serr != nil {
		add(CodeInvalidDate, "startDate", "startDate must be a date YYYY-MM-DD.", nilIfEmpty(r.StartDate))
	}
	if eerr != nil {
		add(CodeInvalidDate, "endDate", "endDate must be a date YYYY-MM-DD.", nilIfEmpty(r.EndDate))
	}
	if serr == nil {
		if oldest := today.AddDate(0, 0, -MaxAgeDays); start.Before(oldest) {
			add(CodeStartTooOld, "startDate", fmt.Sprintf("startDate must be at most %d days before today (UTC): %s or later.", MaxAgeDays, oldest.Format(time.DateOnly)), r.StartDate)
		}
		// Local days run up to 14 hours ahead of UTC: tomorrow (UTC) may
		// already have begun in the marketplace's zone.
		if latest := today.AddDate(0, 0, 1); start.After(latest) {
			add(CodeStartInFuture, "startDate", fmt.Sprintf("startDate must not be after %s.", latest.Format(time.DateOnly)), r.StartDate)
		}
	}
	if serr == nil && eerr == nil {
		if end.Before(start) {
			add(CodeEndBeforeStart, "endDate", "endDate must be on or after startDate.", r.EndDate)
		} else if days := int(end.Sub(start)/(24*time.Hour)) + 1; days > MaxWindowDays {
			add(CodeWindowTooLong, "endDate", fmt.Sprintf("The window covers %d days; at most %d, counting both ends.", days, MaxWindowDays), r.EndDate)
		}
	}
	switch r.Format {
	case "":
		r.Format = FormatCSV
	case FormatCSV, FormatParquet:
	default:
		add(CodeInvalidFormat, "format", `format must be "csv" or "parquet".`, r.Format)
	}
	return probs
}

// datasetMessage is the message of an unknown dataset.
var datasetMessage = fmt.Sprintf("dataset must be %q or %q.", DatasetMonitoringMetrics, DatasetBalanceLedger)

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// parseDate reads a calendar date YYYY-MM-DD (exactly that form).
func parseDate(s string) (time.Time, error) {
	if len(s) != len(time.DateOnly) {
		return time.Time{}, fmt.Errorf("not YYYY-MM-DD")
	}
	return time.Parse(time.DateOnly, s)
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

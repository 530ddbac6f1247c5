package exports

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	now := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	ok := func() Request {
		return Request{Dataset: "monitoring_metrics", Dimensions: []string{"day_local", "campaign_id"}, Metrics: []string{"clicks", "ad_spend"},
			Granularity: "day_local", StartDate: "2026-11-01", EndDate: "2026-11-21"}
	}
	var allDims, allMetrics, extensions []string
	for _, d := range monitoringMetrics.Dimensions {
		allDims = append(allDims, d.Name)
	}
	for _, m := range monitoringMetrics.Metrics {
		if strings.HasPrefix(m.Name, "budget_refused_") || m.Name == "invalid_clicks" {
			extensions = append(extensions, m.Name) // Endcap's, after the spec's 19
			continue
		}
		allMetrics = append(allMetrics, m.Name)
	}
	for _, tc := range []struct {
		name  string
		edit  func(r *Request)
		codes string // the problems' codes, comma-separated, in order
	}{
		{"valid", func(r *Request) {}, ""},
		{"every dimension and metric", func(r *Request) { r.Dimensions, r.Metrics = allDims, allMetrics }, ""},
		{"the extension metrics", func(r *Request) { r.Metrics = append([]string{"clicks"}, extensions...) }, ""},
		{"the extensions count towards the 19", func(r *Request) { r.Metrics = append(append([]string{}, allMetrics...), extensions[0]) }, CodeInvalidMetrics},
		{"parquet", func(r *Request) { r.Format = "parquet" }, ""},
		{"no dataset", func(r *Request) { r.Dataset = "" }, CodeInvalidDataset},
		{"other dataset", func(r *Request) { r.Dataset = "campaign_metrics" }, CodeInvalidDataset},
		{"no dimensions", func(r *Request) { r.Dimensions = nil }, CodeInvalidDimensions},
		{"28 dimensions", func(r *Request) { r.Dimensions = append(append([]string{}, allDims...), "x") }, CodeInvalidDimensions + "," + CodeUnknownDimension},
		{"duplicate dimension", func(r *Request) { r.Dimensions = []string{"day_local", "campaign_id", "day_local"} }, CodeDuplicate},
		{"unknown dimension", func(r *Request) { r.Dimensions = []string{"day_local", "Campaign_ID"} }, CodeUnknownDimension},
		{"no metrics", func(r *Request) { r.Metrics = []string{} }, CodeInvalidMetrics},
		{"20 metrics", func(r *Request) { r.Metrics = append(append([]string{}, allMetrics...), "revenue") }, CodeInvalidMetrics + "," + CodeUnknownMetric},
		{"duplicate metric", func(r *Request) { r.Metrics = []string{"ctr", "ctr"} }, CodeDuplicate},
		{"unknown metric", func(r *Request) { r.Metrics = []string{"revenue"} }, CodeUnknownMetric},
		{"granularity", func(r *Request) { r.Granularity = "week_local" }, CodeInvalidGranular},
		{"no granularity", func(r *Request) { r.Granularity = "" }, CodeInvalidGranular},
		{"bad start", func(r *Request) { r.StartDate = "2026-11-1" }, CodeInvalidDate},
		{"bad end", func(r *Request) { r.EndDate = "2026-02-30" }, CodeInvalidDate},
		{"datetime", func(r *Request) { r.StartDate = "2026-11-01T00:00:00Z" }, CodeInvalidDate},
		{"31 days", func(r *Request) { r.StartDate, r.EndDate = "2026-10-22", "2026-11-21" }, ""},
		{"32 days", func(r *Request) { r.StartDate, r.EndDate = "2026-10-21", "2026-11-21" }, CodeWindowTooLong},
		{"one day", func(r *Request) { r.StartDate, r.EndDate = "2026-11-21", "2026-11-21" }, ""},
		{"120 days back", func(r *Request) { r.StartDate, r.EndDate = "2026-07-24", "2026-07-24" }, ""},
		{"121 days back", func(r *Request) { r.StartDate, r.EndDate = "2026-07-23", "2026-07-24" }, CodeStartTooOld},
		{"end before start", func(r *Request) { r.StartDate, r.EndDate = "2026-11-10", "2026-11-09" }, CodeEndBeforeStart},
		{"tomorrow", func(r *Request) { r.StartDate, r.EndDate = "2026-11-22", "2026-11-22" }, ""},
		{"future", func(r *Request) { r.StartDate, r.EndDate = "2026-11-23", "2026-11-23" }, CodeStartInFuture},
		{"format", func(r *Request) { r.Format = "xlsx" }, CodeInvalidFormat},
		{"balance ledger", func(r *Request) {
			r.Dataset, r.Granularity, r.Dimensions, r.Metrics = "balance_ledger", "movement", []string{"occurred_at", "vendor_id", "kind"}, []string{"amount", "credit_limit"}
		}, ""},
		{"balance ledger by day", func(r *Request) {
			r.Dataset, r.Dimensions, r.Metrics = "balance_ledger", []string{"vendor_id"}, []string{"amount"}
		}, CodeInvalidGranular},
		{"balance ledger with a rollup column", func(r *Request) {
			r.Dataset, r.Granularity, r.Dimensions, r.Metrics = "balance_ledger", "movement", []string{"vendor_id", "campaign_name"}, []string{"amount", "clicks"}
		}, CodeUnknownDimension + "," + CodeUnknownMetric},
		{"a rollup export by movement", func(r *Request) { r.Granularity = "movement" }, CodeInvalidGranular},
		{"several", func(r *Request) { r.Dataset, r.Metrics, r.EndDate = "", []string{"ctr", "ctr", "x"}, "2026-10-01" },
			CodeInvalidDataset + "," + CodeDuplicate + "," + CodeUnknownMetric + "," + CodeEndBeforeStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.edit(&r)
			probs := r.Validate(now)
			var codes []string
			for _, p := range probs {
				codes = append(codes, p.Code)
				if p.Field == "" || p.Message == "" {
					t.Errorf("problem without field or message: %+v", p)
				}
			}
			if got := strings.Join(codes, ","); got != tc.codes {
				t.Errorf("codes %q, want %q (%+v)", got, tc.codes, probs)
			}
			if tc.codes == "" && r.Format == "" {
				t.Error("the default format is not set")
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		body   string
		fields string
	}{
		{`{"dataset":"monitoring_metrics","dimensions":["a"],"metrics":["b"],"granularity":"day_local","startDate":"2026-01-01","endDate":"2026-01-02","extra":1}`, ""},
		{`{"dimensions":"day_local","startDate":20260101}`, "dimensions,startDate"},
		{`{"metrics":[1,2]}`, "metrics"},
		{`[]`, "body"},
		{`null`, "body"},
		{`{"dataset":`, "body"},
		{``, "body"},
	} {
		_, probs := DecodeRequest([]byte(tc.body))
		var fields []string
		for _, p := range probs {
			if p.Code != CodeInvalidRequest {
				t.Errorf("%s: code %s", tc.body, p.Code)
			}
			fields = append(fields, p.Field)
		}
		if got := strings.Join(fields, ","); got != tc.fields {
			t.Errorf("%s: fields %q, want %q", tc.body, got, tc.fields)
		}
	}
}

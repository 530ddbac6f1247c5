package console

import (
	"encoding/json"
	"html/template"
	"strings"
)

// Chart is a chart a page draws (static/charts.js, uPlot): the page puts its
// charts as JSON in <script type="application/json" id="chart-data"> and a
// <div class="chart" id="…"> for each. A new chart is Go only.
type Chart struct {
	ID string `json:"id"` // the element it is drawn in
	// X: unix seconds (the axis shows dates or times).
	X      []int64  `json:"x"`
	Series []Series `json:"series"`
	// Time: x is shown as times of day (HH:MM) rather than dates, in the
	// time zone TZ (an IANA name; "" is the browser's).
	Time bool   `json:"time,omitempty"`
	TZ   string `json:"tz,omitempty"`
}

// Series is one line of a chart. Values are null where undefined.
type Series struct {
	Label  string     `json:"label"`
	Values []*float64 `json:"values"`
	// Axis: "left" (default) or "right": two series of different units
	// share a chart on two axes.
	Axis  string `json:"axis,omitempty"`
	Color string `json:"color"`
	// Format of the legend's value: "int", "money" (2 decimals), "ratio"
	// (2 decimals) or "pct" (1 decimal and %).
	Format string `json:"format"`
}

// Chart colours: distinguishable, and 4.5:1 or more on white.
const (
	colorBlue   = "#0b4fa8"
	colorOrange = "#b34700"
	colorGreen  = "#146c2e"
	colorPurple = "#6a1b9a"
)

// chartsJSON is the charts as the page embeds them.
func chartsJSON(charts []Chart) template.JS {
	b, _ := json.Marshal(charts)
	// In a <script type="application/json">: no "</" can close it.
	return template.JS(strings.ReplaceAll(string(b), "</", `<\/`))
}

// values makes a series' values from n numbers, nil where ok is false.
func values(n int, at func(i int) (float64, bool)) []*float64 {
	out := make([]*float64, n)
	for i := range out {
		if v, ok := at(i); ok {
			out[i] = &v
		}
	}
	return out
}

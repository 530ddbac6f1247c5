package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/accounts"
)

func TestParseWindow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"", -1, false}, {"0", 0, false}, {"14d", 14 * 24 * time.Hour, false}, {"36h", 36 * time.Hour, false},
		{"90m", 90 * time.Minute, false}, {"30d", 30 * 24 * time.Hour, false},
		{"31d", 0, true}, {"-1h", 0, true}, {"1.5s", 0, true}, {"d", 0, true}, {"2w", 0, true}, {"1.5d", 0, true},
	} {
		got, err := parseWindow("click", c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("parseWindow(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// TestSetAttribution changes a marketplace's windows in steps through the
// admin command's function, against a real accounts log (kfake).
func TestSetAttribution(t *testing.T) {
	ctx, acc, m := testMarketplace(t)
	type printed struct {
		Marketplace accounts.Marketplace
		Windows     map[string]struct{ Click, Impression string } `json:"effectiveWindows"`
		Halo        bool
	}
	run := func(f attributionFlags) (printed, error) {
		var out bytes.Buffer
		err := setAttribution(ctx, acc, &out, m.ID, f)
		var p printed
		if err == nil {
			if jerr := json.Unmarshal(out.Bytes(), &p); jerr != nil {
				t.Fatalf("output %s: %v", out.Bytes(), jerr)
			}
		}
		return p, err
	}
	p, err := run(attributionFlags{format: "banners", click: "2d", halo: "off"})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Windows["banners"]; w.Click != "48h0m0s" || w.Impression != "24h0m0s" || p.Halo ||
		p.Windows["listings"].Click != "336h0m0s" || p.Marketplace.Attribution.Revision != 1 {
		t.Errorf("after banners click 2d: %+v", p)
	}
	p, err = run(attributionFlags{format: "all", impression: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Windows["banners"]; w.Click != "48h0m0s" || w.Impression != "0s" || p.Halo ||
		p.Windows["hotels"].Impression != "0s" || p.Windows["hotels"].Click != "336h0m0s" || p.Marketplace.Attribution.Revision != 2 {
		t.Errorf("after every impression 0: %+v", p)
	}
	p, err = run(attributionFlags{format: "all", reset: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Windows["banners"]; w.Click != "336h0m0s" || w.Impression != "24h0m0s" || !p.Halo || p.Marketplace.Attribution.Revision != 3 {
		t.Errorf("after reset: %+v", p)
	}
	for _, bad := range []attributionFlags{{format: "video", click: "1d"}, {format: "all", halo: "maybe"}, {format: "all", click: "40d"}} {
		if _, err := run(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := setAttribution(ctx, acc, io.Discard, "", attributionFlags{format: "all"}); err == nil || !strings.Contains(err.Error(), "--marketplace") {
		t.Errorf("no marketplace: %v", err)
	}
	if _, err := acc.SetAttribution(ctx, m.ID, map[string]accounts.AttributionWindow{"listings": {ClickSeconds: -1}}, false); err == nil {
		t.Error("a negative window was accepted")
	}
}

package exports

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// Both formats hold the same rows: written from the same cells, read back
// as text, they are equal, with the columns in the order given.
func TestFormatsAgree(t *testing.T) {
	cols := []Column{
		{"metrics_first_is_fine", KindInt}, {"campaign_name", KindString}, {"day_local", KindDate}, {"page_value", KindStrings},
		{"is_active", KindBool}, {"ad_spend", KindMoney}, {"cpc", KindPrice}, {"ctr", KindRatio}, {"a_sorts_first", KindString},
		{"occurred_at", KindTimestamp},
	}
	rows := [][]cell{
		{{i: 7}, {s: `Summer, "big" sale`}, {i: 20778}, {ss: []string{"shoes", "red"}}, {b: true}, {m: moneyOf(5_555_560, 0)},
			{m: moneyOf(0, 250)}, {f: 0.25}, {s: "x"}, {i: 1795248531688}},
		{{i: 0}, {s: ""}, {i: 0}, {ss: nil}, {b: false}, {m: moneyOf(2_345, 670)}, {null: true}, {null: true}, {s: "line\nbreak"}, {i: 0}},
		{{i: -3}, {s: "ünïcode 🛒"}, {i: -1}, {ss: []string{""}}, {b: true}, {m: moneyOf(-1_500_000, 0)}, {m: moneyOf(9_000_000_000_000_000, 999)}, {f: 1.0 / 3}, {s: " "}, {i: 1}},
		// Formulas in text cells (a spreadsheet would run them); the
		// negative numbers stay numbers.
		{{i: -4}, {s: `=HYPERLINK("https://evil.example","x")`}, {i: 1}, {ss: []string{"=1+1"}}, {b: false}, {m: moneyOf(-2_000_000, 0)}, {null: true}, {f: -0.5}, {s: "@SUM(A1)"}, {i: 1}},
		{{i: 1}, {s: "+1"}, {i: 1}, {ss: nil}, {b: false}, {m: moneyOf(0, 0)}, {null: true}, {null: true}, {s: "-2+3"}, {i: 1}},
		{{i: 1}, {s: "\tx"}, {i: 1}, {ss: nil}, {b: false}, {m: moneyOf(0, 0)}, {null: true}, {null: true}, {s: "\r=1"}, {i: 1}},
	}
	files := map[string][]byte{}
	for _, format := range []string{FormatCSV, FormatParquet} {
		var buf bytes.Buffer
		w, err := newFileWriter(format, &buf, cols, map[string]string{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files[format] = buf.Bytes()
	}
	hc, rc, err := ReadFile(FormatCSV, files[FormatCSV])
	if err != nil {
		t.Fatal(err)
	}
	hp, rp, err := ReadFile(FormatParquet, files[FormatParquet])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	if !reflect.DeepEqual(hc, names) || !reflect.DeepEqual(hp, names) {
		t.Fatalf("headers\ncsv     %q\nparquet %q\nwant    %q", hc, hp, names)
	}
	want := [][]string{
		{"7", `Summer, "big" sale`, "2026-11-21", `["shoes","red"]`, "true", "5.55556", "0.00000025", "0.25", "x", "2026-11-21T08:08:51.688Z"},
		{"0", "", "1970-01-01", "[]", "false", "0.00234567", "", "", "line\nbreak", "1970-01-01T00:00:00.000Z"},
		{"-3", "ünïcode 🛒", "1969-12-31", `[""]`, "true", "-1.5", "9000000000.000000999", "0.3333333333333333", " ", "1970-01-01T00:00:00.001Z"},
		{"-4", `=HYPERLINK("https://evil.example","x")`, "1970-01-02", `["=1+1"]`, "false", "-2", "", "-0.5", "@SUM(A1)", "1970-01-01T00:00:00.001Z"},
		{"1", "+1", "1970-01-02", "[]", "false", "0", "", "", "-2+3", "1970-01-01T00:00:00.001Z"},
		{"1", "\tx", "1970-01-02", "[]", "false", "0", "", "", "\r=1", "1970-01-01T00:00:00.001Z"},
	}
	// Parquet holds the values as they are (typed columns, no formulas);
	// CSV's text cells that a spreadsheet would run get an apostrophe.
	wantCSV := slices.Clone(want)
	for i, r := range want[3:] {
		r = slices.Clone(r)
		r[1], r[8] = "'"+r[1], "'"+r[8]
		wantCSV[3+i] = r
	}
	if !reflect.DeepEqual(rc, wantCSV) {
		t.Errorf("csv rows\n%q\nwant\n%q", rc, wantCSV)
	}
	if !reflect.DeepEqual(rp, want) {
		t.Errorf("parquet rows\n%q\nwant\n%q", rp, want)
	}
}

// An export with no rows is a header (CSV) or a schema (Parquet).
func TestEmptyFiles(t *testing.T) {
	cols := []Column{{"day_local", KindDate}, {"clicks", KindInt}}
	for _, format := range []string{FormatCSV, FormatParquet} {
		var buf bytes.Buffer
		w, err := newFileWriter(format, &buf, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		h, rows, err := ReadFile(format, buf.Bytes())
		if err != nil || !reflect.DeepEqual(h, []string{"day_local", "clicks"}) || len(rows) != 0 {
			t.Errorf("%s: %q %q %v", format, h, rows, err)
		}
	}
}

// Rows past one batch of the Parquet writer (its DECIMAL bytes live in a
// buffer reused from batch to batch) read back the same as their CSV.
func TestFormatsAgreeManyRows(t *testing.T) {
	cols := []Column{{"entity_id", KindString}, {"ad_spend", KindMoney}, {"cpm", KindPrice}, {"page_value", KindStrings}}
	const n = 5*rowBatch + 7
	files := map[string][]byte{}
	for _, format := range []string{FormatCSV, FormatParquet} {
		var buf bytes.Buffer
		w, err := newFileWriter(format, &buf, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]cell, len(cols))
		for i := range n {
			row[0] = cell{s: "p-" + strconv.Itoa(i)}
			row[1] = cell{m: moneyOf(int64(i)*1_234_567, uint64(i%1000))}
			row[2] = perUnitCell(moneyOf(int64(i)*7, 0), uint64(i%3), 1000)
			row[3] = cell{ss: []string{strconv.Itoa(i), "x"}[:i%3]}
			if err := w.Write(row); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files[format] = buf.Bytes()
	}
	_, rc, err := ReadFile(FormatCSV, files[FormatCSV])
	if err != nil {
		t.Fatal(err)
	}
	_, rp, err := ReadFile(FormatParquet, files[FormatParquet])
	if err != nil {
		t.Fatal(err)
	}
	if len(rc) != n || !reflect.DeepEqual(rc, rp) {
		for i := range min(len(rc), len(rp)) {
			if !reflect.DeepEqual(rc[i], rp[i]) {
				t.Fatalf("row %d: csv %q, parquet %q (%d and %d rows)", i, rc[i], rp[i], len(rc), len(rp))
			}
		}
		t.Fatalf("%d csv rows, %d parquet rows, want %d", len(rc), len(rp), n)
	}
	if rc[n-1][1] != moneyOf(int64(n-1)*1_234_567, uint64((n-1)%1000)).String() {
		t.Errorf("last row %q", rc[n-1])
	}
}

// TestFormulaSafe: the characters that make a spreadsheet read a cell as a
// formula (OWASP, CSV injection) get an apostrophe in front; nothing else
// is touched.
func TestFormulaSafe(t *testing.T) {
	for in, want := range map[string]string{
		"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx", "\r=1": "'\r=1",
		"=HYPERLINK(\"https://evil.example\")": "'=HYPERLINK(\"https://evil.example\")",
		"":                                     "", "shoes": "shoes", " =1": " =1", "a=1": "a=1", "'=1": "'=1", "1-2": "1-2", "\n=1": "\n=1", "é=": "é=",
	} {
		if got := FormulaSafe(in); got != want {
			t.Errorf("FormulaSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// A list of strings is written as JSON by the house's one string encoder,
// jsontext.AppendString: the same escapes as every other JSON Endcap writes.
func TestStringsCellJSON(t *testing.T) {
	for _, tc := range []struct {
		ss   []string
		want string
	}{
		{nil, `[]`},
		{[]string{"shoes", "red"}, `["shoes","red"]`},
		{[]string{"line\nbreak\ttab\rret"}, `["line\nbreak\ttab\rret"]`},
		{[]string{"\x01\x1f"}, `["\u0001\u001f"]`},
		{[]string{`"q" \ `}, `["\"q\" \\ "]`},
		{[]string{"a\u2028b\u2029"}, `["a\u2028b\u2029"]`},
		{[]string{"bad\xffutf8", "ünïcode 🛒"}, `["bad\ufffdutf8","ünïcode 🛒"]`},
	} {
		c := cell{ss: tc.ss}
		if got := string(appendText(nil, KindStrings, &c, false)); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.ss, got, tc.want)
		}
	}
}

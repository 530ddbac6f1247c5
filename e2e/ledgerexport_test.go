package e2e

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/testkit/testenv"
)

var (
	ledgerDimensions = []string{"occurred_at", "day_local", "vendor_id", "movement_id", "kind", "description", "campaign_id", "charge_type", "currency_code"}
	ledgerMetrics    = []string{"amount", "credit_limit"}
)

// TestExportsBalanceLedger: a vendor tops up 0.07, gets a credit limit of
// 0.02 and has four clicks at 0.03 on its campaign: three are drawn (0.09
// = its funds), the fourth is refused for funds. The balance_ledger export
// (CSV and Parquet) lists the top-up, the credit-limit change, the three
// charges and the refusal, each once, in time order, and its amounts add
// up to GET balance (top-ups − charges); another vendor's top-up is its
// own. An export requested for one vendor holds that vendor's rows only.
func TestExportsBalanceLedger(t *testing.T) {
	s := startSystem(t, exConfig(t))
	key := s.AdvancedKey
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.App.Accounts.SetBalances(ctx, s.Marketplace.ID, true, 0); err != nil {
		t.Fatal(err)
	}
	// A lone winner pays the reserve: every click costs 0.03.
	if _, err := s.App.Accounts.SetReserve(ctx, s.Marketplace.ID, 30_000, 0); err != nil {
		t.Fatal(err)
	}
	bwVendors(t, s, key, "v1", "v2")
	const bal = "/public/v1/billing-service/vendors/"
	bwStatus(t, bwDo(t, s, "POST", bal+"v1/balance", key, `{"balance": 0.07, "description": "=SUM(A1)"}`, nil), 200)
	bwStatus(t, bwDo(t, s, "PUT", bal+"v1/credit-limit", key, `{"creditLimit": 0.02}`, nil), 200)
	bwStatus(t, bwDo(t, s, "POST", bal+"v2/balance", key, `{"balance": 1}`, nil), 200)
	camp, bid := exOneWinner(t, s, key, "Ledger")

	// Four auctions while the funds last, then a click on each winner.
	click := func(i int, bid string) string {
		return fmt.Sprintf(`{"id":"lg-clk-%d","occurredAt":%q,"opaqueUserId":"u-lg-%d","resolvedBidId":%q}`, i, ts(time.Now().Add(-time.Second)), i, bid)
	}
	clicks := []string{click(0, bid)}
	for i := 1; i < 4; i++ {
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
		if len(res) != 1 || len(res[0].Winners) != 1 {
			t.Fatalf("auction %d: %+v", i, res)
		}
		clicks = append(clicks, click(i, res[0].Winners[0].ResolvedBidID))
	}
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(`{"clicks":[`+strings.Join(clicks, ",")+`]}`), nil), 200)
	var balance map[string]any
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM charges_raw FINAL WHERE marketplace_id = ?", s.Marketplace.ID); n != 4 {
			return fmt.Errorf("%d charge rows, want 4", n)
		}
		r := bwDo(t, s, "GET", bal+"v1/balance", key, nil, nil)
		bwStatus(t, r, 200)
		balance = bwObj(t, r.Body)
		return nil
	})
	if balance["charged"] != 0.09 || balance["balance"] != -0.02 || balance["outOfFunds"] != true {
		t.Fatalf("balance %v, want 0.09 charged, -0.02", balance)
	}

	req := func(format string) map[string]any {
		return exWith("dataset", "balance_ledger", "granularity", "movement", "dimensions", ledgerDimensions,
			"metrics", ledgerMetrics, "format", format, "startDate", exDay(-1), "endDate", exDay(1))
	}
	csvID := exAccepted(t, exCreate(t, s, key, req("csv")))
	pqID := exAccepted(t, exCreate(t, s, key, req("parquet")))

	// want: kind per vendor, as the export must list them.
	check := func(t *testing.T, what string, rows [][]string) {
		t.Helper()
		col := func(name string) int {
			return slices.Index(append(slices.Clone(ledgerDimensions), ledgerMetrics...), name)
		}
		sums := map[string]*big.Rat{}
		kinds := map[string][]string{}
		seen := map[string]bool{}
		last := ""
		for _, r := range rows {
			v, id := r[col("vendor_id")], r[col("movement_id")]
			if seen[id] {
				t.Errorf("%s: movement %s listed twice", what, id)
			}
			seen[id] = true
			if r[col("occurred_at")] < last {
				t.Errorf("%s: %s before %s: not in time order", what, r[col("occurred_at")], last)
			}
			last = r[col("occurred_at")]
			a, ok := new(big.Rat).SetString(r[col("amount")])
			if !ok {
				t.Fatalf("%s: amount %q", what, r[col("amount")])
			}
			if sums[v] == nil {
				sums[v] = new(big.Rat)
			}
			sums[v].Add(sums[v], a)
			k := r[col("kind")]
			kinds[v] = append(kinds[v], k)
			switch k {
			case "charge":
				if r[col("campaign_id")] != camp || r[col("charge_type")] != "CPC" || r[col("amount")] != "-0.03" {
					t.Errorf("%s: charge %q", what, r)
				}
			case "credit_limit":
				if r[col("credit_limit")] != "0.02" || r[col("amount")] != "0" {
					t.Errorf("%s: credit limit %q", what, r)
				}
			case "charge_refused":
				if r[col("amount")] != "0" {
					t.Errorf("%s: refused %q", what, r)
				}
			}
			if r[col("currency_code")] != "USD" {
				t.Errorf("%s: currency %q", what, r)
			}
		}
		slices.Sort(kinds["v1"])
		if want := []string{"charge", "charge", "charge", "charge_refused", "credit_limit", "top_up"}; !slices.Equal(kinds["v1"], want) {
			t.Errorf("%s: v1's rows %q, want %q", what, kinds["v1"], want)
		}
		if !slices.Equal(kinds["v2"], []string{"top_up"}) {
			t.Errorf("%s: v2's rows %q", what, kinds["v2"])
		}
		// Top-ups − charges = the balance GET answers.
		if got, want := sums["v1"].FloatString(6), fmt.Sprintf("%.6f", balance["balance"].(float64)); got != want {
			t.Errorf("%s: v1's amounts add up to %s, its balance is %s", what, got, want)
		}
		if got := sums["v2"].FloatString(6); got != "1.000000" {
			t.Errorf("%s: v2's amounts add up to %s, want 1", what, got)
		}
	}

	t.Run("csv", func(t *testing.T) {
		v := exCompleted(t, s, csvID)
		if v.Dataset != "balance_ledger" || v.Granularity != "movement" || *v.RowCount != 7 || v.Partial == nil || !*v.Partial {
			t.Fatalf("completed export %+v", v)
		}
		st, _, data := exDownload(t, v.URL)
		if st != http.StatusOK {
			t.Fatalf("download: %d", st)
		}
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(recs[0], append(slices.Clone(ledgerDimensions), ledgerMetrics...)) {
			t.Fatalf("header %q", recs[0])
		}
		// The description a spreadsheet would run is neutralised.
		if !bytes.Contains(data, []byte(",'=SUM(A1),")) {
			t.Errorf("the top-up's description is not neutralised:\n%s", data)
		}
		for _, r := range recs[1:] {
			if _, err := time.Parse(time.RFC3339Nano, r[0]); err != nil || !strings.HasSuffix(r[0], "Z") {
				t.Errorf("occurred_at %q", r[0])
			}
		}
		check(t, "csv", recs[1:])
	})

	t.Run("parquet", func(t *testing.T) {
		v := exCompleted(t, s, pqID)
		st, _, data := exDownload(t, v.URL)
		if st != http.StatusOK {
			t.Fatalf("download: %d", st)
		}
		cols, prows := exParquet(t, data)
		if !slices.Equal(cols, append(slices.Clone(ledgerDimensions), ledgerMetrics...)) {
			t.Fatalf("columns %q", cols)
		}
		rows := make([][]string, len(prows))
		for i, pr := range prows {
			rows[i] = make([]string, len(cols))
			for _, val := range pr {
				c := val.Column()
				switch cols[c] {
				case "occurred_at":
					rows[i][c] = time.UnixMilli(val.Int64()).UTC().Format("2006-01-02T15:04:05.000Z")
				case "day_local":
					rows[i][c] = time.Unix(int64(val.Int32())*86400, 0).UTC().Format(time.DateOnly)
				case "amount", "credit_limit":
					if !val.IsNull() {
						rows[i][c] = lgDecimal(val)
					}
				default:
					rows[i][c] = val.String()
				}
			}
		}
		check(t, "parquet", rows)
	})

	t.Run("one vendor", func(t *testing.T) {
		e, err := s.App.Exports.CreateForVendor(ctx, s.Marketplace.ID, "v2", exports.Request{Dataset: "balance_ledger",
			Dimensions: ledgerDimensions, Metrics: ledgerMetrics, Granularity: "movement", StartDate: exDay(-1), EndDate: exDay(1)})
		if err != nil {
			t.Fatal(err)
		}
		v := exCompleted(t, s, e.ID)
		_, _, data := exDownload(t, v.URL)
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(recs) != 2 || recs[1][2] != "v2" || recs[1][4] != "top_up" || recs[1][9] != "1" {
			t.Fatalf("v2's ledger (%v):\n%s", err, data)
		}
	})
}

// lgDecimal is a Parquet DECIMAL(38,9) (16 bytes, big-endian two's
// complement) as the fewest digits, as the CSV writes it.
func lgDecimal(v parquet.Value) string {
	b := v.ByteArray()
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	s := new(big.Rat).SetFrac(n, big.NewInt(1_000_000_000)).FloatString(9)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/management/catalog"
)

// Vendor balances (docs/reference/balances.md) in the console: the operators' list of
// the vendors' funds, a vendor's funds and ledger with the top-up and
// credit-limit forms, and a vendor user's own, read-only. The forms call
// the billing service the balance routes call, with the routes' reading of
// amounts (api.BalanceAmount); a top-up form carries a request key, so that
// submitting it twice credits once.

// ledgerPage is how many movements a page of the ledger lists.
const ledgerPage = 20

// balanceRow is a vendor of the balances list with its funds.
type balanceRow struct {
	Vendor catalog.VendorView
	billing.Balance
	Out bool // its campaigns do not serve (with balances on)
}

type balancesData struct {
	Enabled    bool
	LowBalance int64
	Currency   string
	Q          string
	Rows       []balanceRow
	Next       string
	// FundsErr says why the funds are not shown ("" when read).
	FundsErr string
}

// fundsErr is the page's sentence for funds that could not be read.
func fundsErr(err error) string {
	if _, msg := statusOf(err); msg != "" {
		return msg
	}
	return "The funds cannot be read right now."
}

// balancesPage lists the marketplace's vendors (a page of them, searched
// as the vendors page) with their funds, read in one round trip.
func (c *Console) balancesPage(ctx *gin.Context) {
	v := viewerOf(ctx)
	mp := v.Marketplace.ID
	d := balancesData{Enabled: v.Marketplace.Balances, LowBalance: v.Marketplace.LowBalanceMicros, Currency: v.Marketplace.Currency,
		Q: trimTo(ctx.Query("q"), 200)}
	vs, more := c.o.Catalog.SearchVendors(mp, d.Q, ctx.Query("after"), pageSize)
	if more && len(vs) > 0 {
		d.Next = vs[len(vs)-1].ID
	}
	ids := make([]string, len(vs))
	for i, x := range vs {
		ids[i] = x.ID
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	defer cancel()
	var bals []billing.Balance
	var err error
	if len(ids) > 0 {
		bals, err = c.o.Balances.GetMany(rctx, mp, ids)
	}
	if err != nil {
		c.o.Log.WarnContext(ctx, "console: balances", "err", err)
		d.FundsErr = fundsErr(err)
	}
	for i, x := range vs {
		r := balanceRow{Vendor: x}
		if err == nil {
			r.Balance = bals[i]
			r.Out = d.Enabled && bals[i].Out()
		}
		d.Rows = append(d.Rows, r)
	}
	c.render(ctx, http.StatusOK, "balances", "Balances", d)
}

type balanceData struct {
	Vendor     catalog.VendorView
	Admin      bool // the forms are shown
	Enabled    bool
	LowBalance int64
	Currency   string
	Funds      billing.Balance
	Out        bool
	FundsErr   string
	Ledger     []billing.Movement
	Next       string // the next page's ?before= ("" on the last)
	Base       string // the page's path
	// RequestKey is the forms' request key (newRequestKey); Form what a
	// refused form sent.
	RequestKey string
	Form       url.Values
	// CreditLimit is the credit-limit form's value: what a refused form
	// sent, else the current limit.
	CreditLimit string
}

// balancePage is a vendor user's own balance; an admin is sent to the list.
func (c *Console) balancePage(ctx *gin.Context) {
	v := viewerOf(ctx)
	if !v.User.Role.IsVendor() {
		ctx.Redirect(http.StatusSeeOther, "/console/balances")
		return
	}
	vv, _, err := c.o.Catalog.GetVendor(v.Marketplace.ID, v.User.VendorID)
	if err != nil {
		c.notFound(ctx, "Your vendor")
		return
	}
	c.renderBalance(ctx, vv, false, "/console/balance")
}

// vendorBalancePage is a vendor's balance and ledger, with the forms, for
// an admin.
func (c *Console) vendorBalancePage(ctx *gin.Context) {
	vv, ok := c.pathVendor(ctx)
	if !ok {
		return
	}
	c.renderBalance(ctx, vv, true, "/console/balances/"+vv.ID)
}

// pathVendor is the vendor of the path, or answers not found.
func (c *Console) pathVendor(ctx *gin.Context) (catalog.VendorView, bool) {
	vv, _, err := c.o.Catalog.GetVendor(viewerOf(ctx).Marketplace.ID, ctx.Param("vendor"))
	if err != nil {
		c.notFound(ctx, "The vendor")
		return catalog.VendorView{}, false
	}
	return vv, true
}

func (c *Console) renderBalance(ctx *gin.Context, vv catalog.VendorView, admin bool, base string) {
	v := viewerOf(ctx)
	mp := v.Marketplace.ID
	d := balanceData{Vendor: vv, Admin: admin, Enabled: v.Marketplace.Balances, LowBalance: v.Marketplace.LowBalanceMicros,
		Currency: v.Marketplace.Currency, Base: base, RequestKey: newRequestKey()}
	if ctx.Request.Method == http.MethodPost {
		d.Form = ctx.Request.PostForm
	}
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 2*time.Second)
	defer cancel()
	bal, err := c.o.Balances.Get(rctx, mp, vv.ID)
	if err != nil {
		c.o.Log.WarnContext(ctx, "console: balance", "vendor", vv.ID, "err", err)
		d.FundsErr = fundsErr(err)
	} else {
		d.Funds, d.Out = bal, d.Enabled && bal.Out()
		d.CreditLimit = money.Micros(bal.CreditLimit).String()
	}
	if sent, ok := d.Form["creditLimit"]; ok && len(sent) > 0 {
		d.CreditLimit = sent[0]
	}
	before := trimTo(ctx.Query("before"), 64)
	ms, more, err := c.o.Balances.Ledger(mp, vv.ID, before, ledgerPage)
	if err != nil {
		c.fail(ctx, err)
		return
	}
	d.Ledger = ms
	if more && len(ms) > 0 {
		d.Next = ms[len(ms)-1].ID
	}
	c.render(ctx, ctx.Writer.Status(), "balance", "Balance of "+vv.Name, d) // 200, or a form's error
}

// balanceForm reads a balance form of the path's vendor and runs it: on
// success back to the vendor's balance page with a notice, a refusal shown
// on the page with what was sent.
func (c *Console) balanceForm(ctx *gin.Context, done string, run func(rctx context.Context, mp, vendor string) error) {
	vv, ok := c.pathVendor(ctx)
	if !ok {
		return
	}
	again := func() { c.renderBalance(ctx, vv, true, "/console/balances/"+vv.ID) }
	if err := ctx.Request.ParseForm(); err != nil {
		c.formError(ctx, errkind.New(errkind.Invalid, "the form could not be read"), again)
		return
	}
	// The form's request key: the same submission twice is one request.
	rctx, cancel := context.WithTimeout(c.keyedRequest(ctx, ctx.Request.PostForm), 10*time.Second)
	defer cancel()
	if err := run(rctx, viewerOf(ctx).Marketplace.ID, vv.ID); err != nil {
		c.formError(ctx, controlError(err), again)
		return
	}
	ctx.Redirect(http.StatusSeeOther, "/console/balances/"+vv.ID+"?done="+done)
}

// topUp credits the vendor the form's amount (its description with it).
func (c *Console) topUp(ctx *gin.Context) {
	c.balanceForm(ctx, "top-up", func(rctx context.Context, mp, vendor string) error {
		micros, err := api.BalanceAmount(ctx.Request.PostForm.Get("amount"), "amount", false)
		if err != nil {
			return err
		}
		_, err = c.o.Balances.TopUp(rctx, mp, vendor, micros, strings.TrimSpace(ctx.Request.PostForm.Get("description")))
		return err
	})
}

// setCreditLimit sets the vendor's credit limit (0: none).
func (c *Console) setCreditLimit(ctx *gin.Context) {
	c.balanceForm(ctx, "credit-limit", func(rctx context.Context, mp, vendor string) error {
		micros, err := api.BalanceAmount(ctx.Request.PostForm.Get("creditLimit"), "creditLimit", true)
		if err != nil {
			return err
		}
		_, err = c.o.Balances.SetCreditLimit(rctx, mp, vendor, micros)
		return err
	})
}

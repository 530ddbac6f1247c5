package api

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/spend"
)

// Vendor balances (docs/reference/balances.md), in Topsort's billing-service shapes
// where it has them:
//
//	GET  /billing-service/vendors/{external_vendor_id}/balance
//	POST /billing-service/vendors/{external_vendor_id}/balance          (top-up; Idempotency-Key)
//	GET  /billing-service/vendors/{external_vendor_id}/balance/ledger
//	PUT  /billing-service/vendors/{external_vendor_id}/credit-limit

// BalanceRoutes returns the vendor balance route set.
func BalanceRoutes(b *billing.Balances, acc *accounts.Service) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		h := &balanceHandlers{b: b, acc: acc, p: p}
		r := g.Group("/billing-service", p.Limit("default"))
		r.GET("/vendors/:external_vendor_id/balance", h.get)
		r.POST("/vendors/:external_vendor_id/balance", h.topUp)
		r.GET("/vendors/:external_vendor_id/balance/ledger", h.ledger)
		r.PUT("/vendors/:external_vendor_id/credit-limit", h.creditLimit)
	}
}

type balanceHandlers struct {
	b   *billing.Balances
	acc *accounts.Service
	p   *Public
}

// balanceOut: Topsort's {balance, currencyCode}, and the rest of the funds.
type balanceOut struct {
	VendorID     string       `json:"vendorId"`
	Balance      money.Micros `json:"balance"`
	CurrencyCode string       `json:"currencyCode"`
	CreditLimit  money.Micros `json:"creditLimit"`
	Available    money.Micros `json:"available"`
	Credited     money.Micros `json:"credited"`
	Charged      money.Micros `json:"charged"`
	// Enabled: the marketplace's charges draw on balances.
	Enabled bool `json:"enabled"`
	// OutOfFunds: the vendor's campaigns do not serve (statusReason
	// insufficient_balance).
	OutOfFunds bool `json:"outOfFunds"`
}

func (h *balanceHandlers) get(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id") {
		return
	}
	mp := Marketplace(c)
	bal, err := h.b.Get(c.Request.Context(), mp.ID, c.Param("external_vendor_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, balanceJSON(mp, bal))
}

func balanceJSON(mp accounts.Marketplace, b billing.Balance) balanceOut {
	return balanceOut{VendorID: b.VendorID, Balance: money.Micros(b.Balance()), CurrencyCode: mp.Currency,
		CreditLimit: money.Micros(b.CreditLimit), Available: money.Micros(b.Available()), Credited: money.Micros(b.Credited),
		Charged: money.Micros(b.Drawn), Enabled: mp.Balances, OutOfFunds: mp.Balances && b.Out()}
}

type topUpIn struct {
	Balance     json.RawMessage `json:"balance"`
	Description string          `json:"description"`
}

type topUpOut struct {
	Result     bool   `json:"result"`
	MovementID string `json:"movementId"`
}

// amountField reads a positive amount of the marketplace currency, whole
// micro-units, at most spend.MaxFunds.
func amountField(raw json.RawMessage, field string, zero bool, errs *validation.Errors) int64 {
	if len(raw) == 0 || string(raw) == "null" {
		errs.Add(validation.Missing, "Field required", "body", field)
		return 0
	}
	if raw[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw[0] == 't' || raw[0] == 'f' {
		errs.Add("type_error.number", "value is not a valid number", "body", field)
		return 0
	}
	if zero && string(raw) == "0" {
		return 0
	}
	m, prob := money.Parse(raw, money.Exact, money.Micros(spend.MaxFunds))
	switch prob {
	case money.OK:
		return int64(m)
	case money.NotPositive, money.TooSmall:
		errs.Add("value_error.number.not_gt", "ensure this value is greater than 0", "body", field)
	case money.TooLarge:
		errs.Add("value_error.number.not_le", "ensure this value is at most 1000000000", "body", field)
	case money.TooPrecise:
		errs.Add("value_error.decimal.max_places", "ensure that there are no more than 6 decimal places", "body", field)
	}
	return 0
}

func (h *balanceHandlers) topUp(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id") {
		return
	}
	var in topUpIn
	if !h.p.BindJSON(c, &in) {
		return
	}
	var errs validation.Errors
	micros := amountField(in.Balance, "balance", false, &errs)
	if len(errs) > 0 {
		abort422(c, errs)
		return
	}
	m, err := h.b.TopUp(c.Request.Context(), Marketplace(c).ID, c.Param("external_vendor_id"), micros, in.Description)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, topUpOut{Result: true, MovementID: m.ID})
}

type movementOut struct {
	ID          string         `json:"id"`
	VendorID    string         `json:"vendorId"`
	Kind        string         `json:"kind"`
	Amount      money.Micros   `json:"amount"`
	Description *string        `json:"description"`
	CreatedAt   timestamp.Time `json:"createdAt"`
}

func movementJSON(m billing.Movement) movementOut {
	return movementOut{ID: m.ID, VendorID: m.VendorID, Kind: m.Kind, Amount: money.Micros(m.Micros),
		Description: bwOpt(m.Description), CreatedAt: timestamp.Of(m.CreatedAt)}
}

func (h *balanceHandlers) ledger(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id") {
		return
	}
	vendorID := c.Param("external_vendor_id")
	before, limit, ok := h.p.PageQuery(c, "balance-ledger", vendorID, bwDefaultLimit, bwMaxLimit)
	if !ok {
		return
	}
	ms, more, err := h.b.Ledger(Marketplace(c).ID, vendorID, before, limit)
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	out := make([]movementOut, len(ms))
	var last string
	for i, m := range ms {
		out[i] = movementJSON(m)
		last = m.ID
	}
	c.JSON(http.StatusOK, gin.H{"hasMore": more, "movements": out, "nextPage": h.p.NextPage(c, "balance-ledger", vendorID, last, more)})
}

type creditLimitIn struct {
	CreditLimit json.RawMessage `json:"creditLimit"`
}

func (h *balanceHandlers) creditLimit(c *gin.Context) {
	if !bwPathParams(c, "external_vendor_id") {
		return
	}
	var in creditLimitIn
	if !h.p.BindJSON(c, &in) {
		return
	}
	var errs validation.Errors
	micros := amountField(in.CreditLimit, "creditLimit", true, &errs)
	if len(errs) > 0 {
		abort422(c, errs)
		return
	}
	mp := Marketplace(c)
	if _, err := h.b.SetCreditLimit(c.Request.Context(), mp.ID, c.Param("external_vendor_id"), micros); err != nil {
		h.p.Fail(c, err)
		return
	}
	bal, err := h.b.Get(c.Request.Context(), mp.ID, c.Param("external_vendor_id"))
	if err != nil {
		h.p.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, balanceJSON(mp, bal))
}

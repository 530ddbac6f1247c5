package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/internal/errkind"
)

// Explainer explains auctions (auction.Engine.Explain, the code behind
// POST /v2/auctions/explain).
type Explainer interface {
	Explain(ctx context.Context, m *auction.Market, endpoint auction.EndpointKind, reqs []auction.Request, maxCandidates int) ([]auction.Explanation, error)
}

// explainForm is the explain page's form: one auction from simple fields,
// or the body of POST /v2/auctions as JSON (which wins when given).
type explainForm struct {
	Type, Slots, Products, Category, Search, Device, User, Placement string
	JSON                                                             string
}

// explainExample is the JSON field's first content.
const explainExample = `{"auctions": [
  {"type": "listings", "slots": 3, "products": {"ids": ["p-1", "p-2", "p-3"]}},
  {"type": "listings", "slots": 2, "searchQuery": "running shoes", "device": "mobile"}
]}`

// maxExplainBody bounds the JSON field (a 500-product auction is about
// 20 KB).
const maxExplainBody = 256 << 10

type explainData struct {
	Form     explainForm
	Example  string
	Results  []explainResult
	Ran      bool
	Currency string
}

type explainResult struct {
	auction.Explanation
	Winners    int
	Candidates []explainRow
}

// explainRow is a candidate as the table shows it.
type explainRow struct {
	auction.ExplainedCandidate
	Campaign string // the campaign's name, when known
	Charge   string
}

func (c *Console) explainPage(ctx *gin.Context) {
	c.render(ctx, http.StatusOK, "explain", "Auction explain", explainData{Form: explainForm{Type: "listings", Slots: "3"}, Example: explainExample,
		Currency: viewerOf(ctx).Marketplace.Currency})
}

// explain runs the form's auctions as POST /v2/auctions/explain does (the
// same parser, the same engine, a dry run) and shows each candidate's
// outcome. Bad input is shown on the form with the API's message.
func (c *Console) explain(ctx *gin.Context) {
	v := viewerOf(ctx)
	f := explainForm{
		Type: ctx.PostForm("type"), Slots: strings.TrimSpace(ctx.PostForm("slots")), Products: ctx.PostForm("products"),
		Category: strings.TrimSpace(ctx.PostForm("category")), Search: ctx.PostForm("search"), Device: ctx.PostForm("device"),
		User: strings.TrimSpace(ctx.PostForm("user")), Placement: strings.TrimSpace(ctx.PostForm("placement")), JSON: ctx.PostForm("json"),
	}
	d := explainData{Form: f, Example: explainExample, Currency: v.Marketplace.Currency}
	again := func() { c.render(ctx, ctx.Writer.Status(), "explain", "Auction explain", d) }
	if c.o.Auctions == nil {
		c.fail(ctx, errkind.New(errkind.Unavailable, "this process does not run auctions"))
		return
	}
	body, err := f.body()
	if err != nil {
		c.formError(ctx, err, again)
		return
	}
	reqs, verr := auction.ParseAuctions(body, auction.Auctions)
	if verr != nil {
		c.formError(ctx, errkind.Newf(errkind.Invalid, "%s (%s)", verr.Message, verr.Code), again)
		return
	}
	defer auction.Release(reqs) // after the page: the results share the requests' strings
	rctx, cancel := context.WithTimeout(ctx.Request.Context(), 5*time.Second)
	defer cancel()
	exps, err := c.o.Auctions.Explain(rctx, api.MarketOf(&v.Marketplace), auction.Auctions, reqs, c.o.ExplainMaxCandidates)
	if err != nil { // too many candidates: the one error Explain returns
		c.formError(ctx, errkind.New(errkind.Invalid, err.Error()), again)
		return
	}
	names := map[string]string{}
	for _, e := range exps {
		r := explainResult{Explanation: e}
		for _, ec := range e.Candidates {
			row := explainRow{ExplainedCandidate: ec, Charge: "CPC"}
			if ec.CPM {
				row.Charge = "CPM"
			}
			if ec.Outcome == auction.Won {
				r.Winners++
			}
			name, ok := names[ec.CampaignID]
			if !ok {
				if cp, _, found := c.o.Campaigns.Campaign(v.Marketplace.ID, ec.CampaignID); found {
					name = cp.Name
				}
				names[ec.CampaignID] = name
			}
			row.Campaign = name
			r.Candidates = append(r.Candidates, row)
		}
		d.Results = append(d.Results, r)
	}
	d.Ran = true
	c.render(ctx, http.StatusOK, "explain", "Auction explain", d)
}

// body is the request the form describes: its JSON field as given, or one
// auction of its simple fields (the parser checks them as any request's).
func (f explainForm) body() ([]byte, error) {
	if strings.TrimSpace(f.JSON) != "" {
		if len(f.JSON) > maxExplainBody {
			return nil, errkind.Newf(errkind.Invalid, "the request is longer than %d KB", maxExplainBody>>10)
		}
		return []byte(f.JSON), nil
	}
	a := map[string]any{"type": f.Type}
	slots, err := strconv.Atoi(f.Slots)
	if err != nil {
		return nil, errkind.New(errkind.Invalid, "slots must be a whole number")
	}
	a["slots"] = slots
	var ids []string
	for _, id := range strings.FieldsFunc(f.Products, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		a["products"] = map[string]any{"ids": ids}
	}
	if f.Category != "" {
		a["category"] = map[string]any{"id": f.Category}
	}
	if s := strings.TrimSpace(f.Search); s != "" {
		a["searchQuery"] = s
	}
	if f.Device != "" {
		a["device"] = f.Device
	}
	if f.User != "" {
		a["opaqueUserId"] = f.User
	}
	if f.Placement != "" {
		a["placementId"] = f.Placement
	}
	return json.Marshal(map[string]any{"auctions": []any{a}})
}

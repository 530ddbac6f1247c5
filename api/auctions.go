package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/accounts"
)

// Auctioneer runs and explains auctions (auction.Engine).
type Auctioneer interface {
	Run(ctx context.Context, m *auction.Market, endpoint auction.EndpointKind, reqs []auction.Request) ([]auction.Result, error)
	Explain(ctx context.Context, m *auction.Market, endpoint auction.EndpointKind, reqs []auction.Request, maxCandidates int) ([]auction.Explanation, error)
}

// postAuctions serves POST /v2/auctions, /v2/auctions/sponsored-brand and
// /v2/auctions/travel: validate the whole request, run each auction, answer
// 201 with one result per auction in request order, then hand the records
// to the recorder (which never blocks and keeps nothing of them).
func (h *handlers) postAuctions(endpoint auction.EndpointKind) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := principal(c)
		bp := auctionBodies.Get().(*[]byte)
		body, ok := readBodyInto(c, h.d.MaxBodyBytes, *bp)
		if !ok {
			auctionBodies.Put(bp)
			return
		}
		reqs, verr := auction.ParseAuctions(body, endpoint) // keeps nothing of body
		if cap(body) <= maxPooledAuctionBody {
			*bp = body[:0]
			auctionBodies.Put(bp)
		}
		if verr != nil {
			telemetry.AuctionsRejected.WithLabelValues(verr.Code).Inc()
			abortV2(c, http.StatusBadRequest, verr.Code, verr.Message)
			return
		}
		// Last: the results and records share the requests' strings.
		defer auction.Release(reqs)
		m := MarketOf(&p.Marketplace)
		results, err := h.d.Auctions.Run(c.Request.Context(), m, endpoint, reqs)
		if err != nil {
			h.d.Log.ErrorContext(c, "auctions failed", "marketplace", m.ID, "err", err)
			abortUnavailable(c, h.d.RetryAfter, "auctions cannot run right now; retry later")
			return
		}
		defer auction.ReleaseResults(results) // before the requests: deferred calls run last first
		rp := auctionBodies.Get().(*[]byte)
		buf := appendAuctionResults((*rp)[:0], results)
		c.Data(http.StatusCreated, "application/json; charset=utf-8", buf) // written out before it returns
		if cap(buf) <= maxPooledAuctionBody {
			*rp = buf[:0]
			auctionBodies.Put(rp)
		}
		for i := range results {
			r := &results[i]
			telemetry.Auctions.WithLabelValues(r.Kind.String(), strconv.FormatBool(len(r.Winners) > 0)).Inc()
			if h.d.AuctionRecorder != nil {
				h.d.AuctionRecorder.Record(&r.Record)
			}
		}
	}
}

// postAuctionsExplain serves POST /v2/auctions/explain: the body of POST
// /v2/auctions, validated the same way (the same 400s), run as a dry run
// (auction.Engine.Explain: nothing recorded, charged or signed), answered
// 200 with every candidate of each auction and what happened to it
// (docs/design/auction-ranking.md, "Explain"); 422 too_many_candidates when the
// request's auctions have more than Deps.ExplainMaxCandidates. It lists
// every advertiser's bids and budget state: the advanced key only, without
// CORS, rate-limited (api.New).
func (h *handlers) postAuctionsExplain(c *gin.Context) {
	p := principal(c)
	body, ok := readBodyInto(c, h.d.MaxBodyBytes, nil)
	if !ok {
		return
	}
	reqs, verr := auction.ParseAuctions(body, auction.Auctions)
	if verr != nil {
		abortV2(c, http.StatusBadRequest, verr.Code, verr.Message)
		return
	}
	defer auction.Release(reqs) // after the answer: it shares the requests' strings
	exps, err := h.d.Auctions.Explain(c.Request.Context(), MarketOf(&p.Marketplace), auction.Auctions, reqs, h.d.ExplainMaxCandidates)
	if err != nil { // *auction.TooManyCandidatesError, the one error Explain returns
		abortV2(c, http.StatusUnprocessableEntity, "too_many_candidates", err.Error())
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", appendExplanations(nil, exps))
}

// appendExplanations writes the explain answer:
// {"results":[{"resultType","slots","candidates":[…],"excludedProducts":[…],"error"}, …]}.
func appendExplanations(b []byte, exps []auction.Explanation) []byte {
	b = append(b, `{"results":[`...)
	for i := range exps {
		e := &exps[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resultType":`...)
		b = jsontext.AppendString(b, e.ResultType())
		b = append(b, `,"slots":`...)
		b = strconv.AppendInt(b, int64(e.Slots), 10)
		b = append(b, `,"candidates":[`...)
		for j := range e.Candidates {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendExplainedCandidate(b, &e.Candidates[j])
		}
		b = append(b, `],"excludedProducts":[`...)
		for j, x := range e.ExcludedProducts {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"productId":`...)
			b = jsontext.AppendString(b, x.ProductID)
			b = append(b, `,"reason":`...)
			b = jsontext.AppendString(b, x.Reason.String())
			b = append(b, '}')
		}
		b = append(b, `],"error":`...)
		b = strconv.AppendBool(b, e.Error)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendExplainedCandidate(b []byte, c *auction.ExplainedCandidate) []byte {
	str := func(b []byte, key, v string) []byte {
		b = append(b, key...)
		if v == "" {
			return append(b, "null"...)
		}
		return jsontext.AppendString(b, v)
	}
	num := func(b []byte, key string, v int64, set bool) []byte {
		b = append(b, key...)
		if !set {
			return append(b, "null"...)
		}
		return strconv.AppendInt(b, v, 10)
	}
	b = str(b, `{"productId":`, c.ProductID)
	b = str(b, `,"campaignId":`, c.CampaignID)
	b = str(b, `,"vendorId":`, c.VendorID)
	b = str(b, `,"bidId":`, c.BidID)
	b = str(b, `,"bidTarget":`, c.BidTarget)
	charge := "CPC"
	if c.CPM {
		charge = "CPM"
	}
	b = str(b, `,"chargeType":`, charge)
	b = append(b, `,"bid":`...)
	b = money.Micros(c.BidMicros).Append(b)
	b = append(b, `,"quality":`...)
	if c.QualityPPM > 0 {
		b = money.Micros(c.QualityPPM).Append(b) // parts per million: the same six decimals
	} else {
		b = append(b, "null"...)
	}
	b = str(b, `,"score":`, c.Score)
	b = str(b, `,"outcome":`, c.Outcome.String())
	b = str(b, `,"reason":`, c.Reason.String())
	b = num(b, `,"position":`, int64(c.Position), c.Position > 0)
	b = num(b, `,"rank":`, int64(c.Rank), c.Outcome == auction.Won)
	b = append(b, `,"price":`...)
	if c.Outcome == auction.Won {
		b = money.Micros(c.PriceMicros).Append(b)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// auctionBodies holds request- and response-body buffers of the auction
// endpoints (a 500-product auction is about 20 KB in, 2.5 KB out): two
// allocations fewer per auction, garbage that sets how often the API's
// collections run (docs/design/performance.md).
var auctionBodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAuctionBody is the largest buffer auctionBodies keeps.
const maxPooledAuctionBody = 256 << 10

// MarketOf is the auction's view of a marketplace (the /v2 routes' and the console's explain page).
func MarketOf(mp *accounts.Marketplace) *auction.Market {
	id, _ := uuid.Parse(mp.ID)
	return &auction.Market{
		ID: mp.ID, UUID: id, Loc: mp.Location(),
		Reserve:  auction.Reserve{CPCMicros: mp.ReserveCPCMicros, CPMMicros: mp.ReserveCPMMicros},
		Balances: mp.Balances,
	}
}

// appendAuctionResults writes the 201 body (wire-contract.md §2.5, §3):
// {"results":[{"resultType":…,"winners":[…],"error":false}, …]}.
func appendAuctionResults(b []byte, results []auction.Result) []byte {
	b = append(b, `{"results":[`...)
	for i := range results {
		r := &results[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resultType":`...)
		b = jsontext.AppendString(b, r.ResultType())
		b = append(b, `,"winners":[`...)
		for j := range r.Winners {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendWinner(b, r.Kind, &r.Winners[j])
		}
		b = append(b, `],"error":`...)
		b = strconv.AppendBool(b, r.Error)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendWinner(b []byte, kind auction.Kind, w *auction.Winner) []byte {
	b = append(b, `{"rank":`...)
	b = strconv.AppendInt(b, int64(w.Rank), 10)
	b = append(b, `,"type":`...)
	b = jsontext.AppendString(b, w.Type)
	b = append(b, `,"id":`...)
	b = jsontext.AppendString(b, w.ID)
	b = append(b, `,"resolvedBidId":`...)
	b = jsontext.AppendString(b, w.ResolvedBidID)
	b = append(b, `,"campaignId":`...)
	b = jsontext.AppendString(b, w.CampaignID)
	switch kind {
	case auction.KindBanners:
		b = append(b, `,"asset":[{"url":`...)
		b = jsontext.AppendString(b, w.AssetURL)
		b = append(b, `}]`...)
	case auction.KindFlights:
		b = append(b, `,"variationID":`...)
		b = jsontext.AppendString(b, w.VariationID)
	case auction.KindSponsoredBrand:
		b = append(b, `,"vendorId":`...)
		b = jsontext.AppendString(b, w.VendorID)
		b = append(b, `,"title":`...)
		b = jsontext.AppendString(b, w.BrandName)
		b = append(b, `,"productIds":[`...)
		for k, id := range w.ProductIDs {
			if k > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, id)
		}
		b = append(b, `],"content":{"brandName":`...)
		b = jsontext.AppendString(b, w.BrandName)
		b = append(b, `,"headline":`...)
		b = jsontext.AppendString(b, w.Headline)
		b = append(b, '}')
	}
	return append(b, '}')
}

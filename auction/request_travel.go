package auction

import (
	"github.com/endcap/endcap/internal/jsontext"
)

// travelProducts validates a travel `products` array of objects.
func (p *parser) travelProducts(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	path := fld("products")
	if err := p.array(sp, i, path, &p.list, &travelProductsArray); err != nil {
		return err
	}
	n := len(p.list)
	flights := r.Kind == KindFlights
	ids := make([]string, n)
	off := len(p.offs)
	var vars []string
	if flights {
		vars = make([]string, n)
	}
	var qs []float64
	var pr []int64
	for k, esp := range p.list {
		ep := path.el(k)
		if p.B[esp.Lo] != '{' {
			return fail(CodeBadRequest, i, ep, "must be an object")
		}
		var f [4]jsontext.Span
		p.Fields(esp.Lo, travelProductNames, f[:])
		if !p.Present(f[0]) {
			return fail(CodeBadRequest, i, ep.dot("id"), "is required")
		}
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, ep.dot("id"), "must be a string")
		}
		lo, hi := p.decode(f[0])
		if lo == hi {
			return fail(CodeBadRequest, i, ep.dot("id"), "must not be empty")
		}
		if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, ep.dot("id"), -1); err != nil {
			return err
		}
		p.offs = append(p.offs, lo, hi)
		if flights {
			v := f[1]
			if !p.Present(v) || p.emptyString(v) {
				return fail(CodeMissingVariationID, i, ep.dot("variationID"), "is required for a flights product")
			}
			if err := p.str(v, i, ep.dot("variationID"), MaxIDLen, CodeBadRequest, &vars[k]); err != nil {
				return err
			}
		}
		// qualityScore and price: given for every product or for none.
		has := p.Present(f[2])
		if k > 0 && has != (qs != nil) {
			return fail(CodeProductInfoMismatch, i, ep.dot("qualityScore"), "must be given for every product or for none")
		}
		if has {
			if qs == nil {
				qs = make([]float64, n)
			}
			qp := ep.dot("qualityScore")
			if err := p.qualityScore(f[2], i, &qp, -1, &qs[k]); err != nil {
				return err
			}
		}
		has = p.Present(f[3])
		if k > 0 && has != (pr != nil) {
			return fail(CodeProductInfoMismatch, i, ep.dot("price"), "must be given for every product or for none")
		}
		if has {
			if pr == nil {
				pr = make([]int64, n)
			}
			if err := p.price(f[3], i, ep.dot("price"), &pr[k]); err != nil {
				return err
			}
		}
	}
	p.lists = append(p.lists, listFixup{ids, off})
	r.ProductIDs, r.VariationIDs, r.QualityScores, r.PricesMicros = ids, vars, qs, pr
	return nil
}

// travelCategory validates `{singleCategory: {id}}`.
func (p *parser) travelCategory(sp jsontext.Span, i int, r *Request) *ValidationError {
	var f [1]jsontext.Span
	if given, err := p.object(sp, i, fld("category"), travelCatNames, f[:]); !given {
		return err
	}
	sc := f[0]
	f[0] = jsontext.Span{}
	given, err := p.object(sc, i, fld("category.singleCategory"), singleCatNames, f[:])
	if err != nil {
		return err
	}
	if !given {
		return fail(CodeInvalidTravelCategory, i, fld("category.singleCategory"), "is required")
	}
	id := f[0]
	if !p.Present(id) || p.B[id.Lo] != '"' || p.emptyString(id) {
		return fail(CodeInvalidTravelCategory, i, fld("category.singleCategory.id"), "must be a non-empty string")
	}
	c := new(CategoryFilter)
	if err := p.str(id, i, fld("category.singleCategory.id"), MaxIDLen, CodeBadRequest, &c.ID); err != nil {
		return err
	}
	r.Category = c
	return nil
}

func (p *parser) travelContext(sp jsontext.Span, isObj bool, f *[numTravelCtxFields]jsontext.Span, i int, r *Request) *ValidationError {
	flights := r.Kind == KindFlights
	missing := CodeBadRequest
	if flights {
		missing = CodeMissingFlightTravelContext
	}
	if !p.Present(sp) {
		return fail(missing, i, fld("travelContext"), "is required")
	}
	if !isObj {
		return fail(CodeBadRequest, i, fld("travelContext"), "must be an object")
	}
	tc := new(TravelContext)
	s := f[tcSite]
	if !p.Present(s) || p.emptyString(s) {
		return fail(missing, i, fld("travelContext.site"), "is required")
	}
	if err := p.str(s, i, fld("travelContext.site"), MaxSiteLen, CodeBadRequest, &tc.Site); err != nil {
		return err
	}
	if s := f[tcPassengers]; p.Present(s) {
		path := fld("travelContext.passengers")
		v, integral, ok := p.integer(s)
		switch {
		case !ok || !integral:
			return fail(CodeBadRequest, i, path, "must be an integer")
		case v < 1:
			return fail(CodeBadRequest, i, path, "must be at least 1")
		case v > MaxPassengers:
			return fail(CodeTooManyPassengers, i, path, "must be fewer than %d", MaxPassengers+1)
		}
		tc.Passengers = int(v)
	}
	var start, end int64
	if err := p.date(f[tcStart], i, fld("travelContext.travelStartDate"), &tc.StartDate, &start); err != nil {
		return err
	}
	if err := p.date(f[tcEnd], i, fld("travelContext.travelEndDate"), &tc.EndDate, &end); err != nil {
		return err
	}
	if p.Present(f[tcStart]) && p.Present(f[tcEnd]) && end <= start {
		return fail(CodeInvalidTravelDateRange, i, fld("travelContext.travelEndDate"), "must be after travelStartDate")
	}
	if s := f[tcTravelerType]; p.Present(s) {
		path := fld("travelContext.travelerType")
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		v := p.UnquoteTmp(s)
		for _, t := range travelerTypes {
			if string(v) == t {
				tc.TravelerType = t
			}
		}
		if tc.TravelerType == "" {
			return fail(CodeInvalidTravelerType, i, path, "must be family, group, solo or couple")
		}
	}
	if err := p.str(f[tcPageName], i, fld("travelContext.pageName"), MaxStringLen, CodeBadRequest, &tc.PageName); err != nil {
		return err
	}
	if err := p.str(f[tcPlatform], i, fld("travelContext.platform"), MaxStringLen, CodeBadRequest, &tc.Platform); err != nil {
		return err
	}
	if flights {
		s := f[tcRoute]
		if !p.Present(s) || p.emptyString(s) {
			return fail(CodeMissingFlightTravelContext, i, fld("travelContext.route"), "is required for a flights auction")
		}
		if err := p.str(s, i, fld("travelContext.route"), MaxStringLen, CodeBadRequest, &tc.Route); err != nil {
			return err
		}
		s = f[tcFlightType]
		path := fld("travelContext.flightType")
		if !p.Present(s) || p.emptyString(s) {
			return fail(CodeMissingFlightTravelContext, i, path, "is required for a flights auction")
		}
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		switch string(p.UnquoteTmp(s)) {
		case "one_way", "one-way":
			tc.FlightType = "one_way"
		case "round_trip", "round-trip":
			tc.FlightType = "round_trip"
		default:
			if err := p.str(s, i, path, MaxStringLen, CodeBadRequest, &tc.FlightType); err != nil {
				return err
			}
		}
	}
	r.Travel = tc
	return nil
}

// date validates an optional YYYY-MM-DD date; *day gets its day number.
func (p *parser) date(sp jsontext.Span, i int, path fpath, dst *string, day *int64) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, path, "must be a string")
	}
	s := p.UnquoteTmp(sp)
	y, m, d, ok := parseDate(s)
	if !ok {
		return fail(CodeInvalidDateFormat, i, path, "must be a date in the form YYYY-MM-DD")
	}
	*day = jsontext.DaysFromCivil(y, m, d)
	lo := len(p.arena)
	p.arena = append(p.arena, s...)
	p.keep(dst, lo, len(p.arena))
	return nil
}

// parseDate parses a calendar date YYYY-MM-DD (proleptic Gregorian).
func parseDate(s []byte) (y, m, d int, ok bool) {
	if len(s) != 10 {
		return 0, 0, 0, false
	}
	return jsontext.Date(s)
}

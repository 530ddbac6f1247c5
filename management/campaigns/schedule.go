package campaigns

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
)

// Dayparting (campaign timetables) and negative keywords: the controls that
// keep a campaign, or one of its bids, out of auctions by the hour of the
// week or by the auction's searchQuery. Both are stored on the entities
// (Campaign.Timetables, Campaign.NegativeKeywords, Bid.NegativeKeywords),
// so that history, replay and the campaign.updated webhook carry them.
// docs/reference/campaigns.md, Dayparting and Negative keywords.

// ReasonOutsideSchedule is the status reason of a running campaign whose
// timetable does not serve the current local hour; ReasonNegativeKeyword
// the auction's reason (and a keyword bid's ineligibleReason) when a
// negative keyword removes a campaign or a bid.
const (
	ReasonOutsideSchedule = "outside_schedule"
	ReasonNegativeKeyword = "negative_keyword"
)

// Negative keyword match types.
const (
	MatchExact  = "exact"
	MatchPhrase = "phrase"
)

// Limits of the controls.
const (
	MaxNegativeKeywords      = 1000 // per campaign, and per bid
	MaxNegativeKeywordLen    = 80   // characters of the keyword as sent
	MaxNegativeExactWords    = 10
	MaxNegativePhraseWords   = 4
	minPluralFoldRunes       = 4
	timetableDays            = 7
	maxTimetableHour         = 24
	timetableDayOfWeekField  = "day_of_week"
	timetableStartHourField  = "start_hour"
	timetableEndHourField    = "end_hour"
	negativeKeywordField     = "keyword"
	negativeMatchTypeField   = "matchType"
	negativeKeywordsBodyName = "negativeKeywords"
)

// TimetableDay is the served hours of one day of the week, in the
// marketplace's time zone: [StartHour:00, EndHour:00).
type TimetableDay struct {
	DayOfWeek int `json:"day_of_week"` // 1 Monday … 7 Sunday
	StartHour int `json:"start_hour"`  // inclusive, 0–23
	EndHour   int `json:"end_hour"`    // exclusive, 1–24
}

// NegativeKeyword keeps a campaign (or a bid) out of the auctions whose
// searchQuery it matches. Keyword is normalised (NormalizeNegative).
type NegativeKeyword struct {
	Keyword   string `json:"keyword"`
	MatchType string `json:"matchType"` // exact | phrase
}

// ServedHours compiles a timetable into the served hours of the week; nil
// when there is none (every hour is served).
func ServedHours(days []TimetableDay) *spend.Hours {
	if len(days) == 0 {
		return nil
	}
	var h spend.Hours
	for _, d := range days {
		if d.DayOfWeek < 1 || d.DayOfWeek > timetableDays || d.StartHour < 0 || d.EndHour > maxTimetableHour {
			continue
		}
		for hr := d.StartHour; hr < d.EndHour; hr++ {
			h[d.DayOfWeek-1] |= 1 << uint(hr)
		}
	}
	return &h
}

// InSchedule reports whether c's timetable serves now, in the
// marketplace's zone loc (nil: UTC). A campaign without a timetable always
// does.
func InSchedule(c Campaign, now time.Time, loc *time.Location) bool {
	h := ServedHours(c.Timetables)
	if h == nil {
		return true
	}
	if loc == nil {
		loc = time.UTC
	}
	return h.Serves(now.In(loc))
}

// ---- timetables: the API ----

// TimetablesInput is the body of PUT …/timetables: the days to create or
// replace (the others stay as they are).
type TimetablesInput struct {
	Timetables Opt[[]TimetableInput] `json:"timetables"`
}

// TimetableInput is one day of a TimetablesInput.
type TimetableInput struct {
	DayOfWeek Opt[int] `json:"day_of_week"`
	StartHour Opt[int] `json:"start_hour"`
	EndHour   Opt[int] `json:"end_hour"`
}

// TimetablesJSON is a campaign's timetable on the wire (days in order;
// empty: the campaign serves every hour).
type TimetablesJSON struct {
	CampaignID string         `json:"campaignId"`
	Timetables []TimetableDay `json:"timetables"`
}

// TimetablesOf renders c's timetable.
func TimetablesOf(c Campaign) TimetablesJSON {
	return TimetablesJSON{CampaignID: c.ID, Timetables: orEmpty(c.Timetables)}
}

// PutTimetables creates or replaces the days of c's timetable that in
// names (an upsert by day_of_week; days not named stay as they are).
// ifMatch, when not 0, is the version of the campaign the caller read.
func (s *Service) PutTimetables(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in TimetablesInput) (Campaign, int64, error) {
	var errs validation.Errors
	var days []TimetableDay
	switch {
	case !in.Timetables.Set:
		errs.Add(validation.Missing, "Field required", "body", "timetables")
	case in.Timetables.Null:
		errs.Add("list_type", "Input should be a valid list", "body", "timetables")
	case len(in.Timetables.V) == 0:
		errs.Add("too_short", "List should have at least 1 item", "body", "timetables")
	case len(in.Timetables.V) > timetableDays:
		errs.Add("too_long", "List should have at most 7 items (one per day of the week)", "body", "timetables")
	default:
		seen := map[int]int{}
		for i, t := range in.Timetables.V {
			d, ok := timetableDay(t, &errs, "body", "timetables", i)
			if !ok {
				continue
			}
			if j, dup := seen[d.DayOfWeek]; dup {
				errs.Add(validation.ValueError, "day_of_week "+strconv.Itoa(d.DayOfWeek)+" is also at index "+strconv.Itoa(j), "body", "timetables", i, timetableDayOfWeekField)
				continue
			}
			seen[d.DayOfWeek] = i
			days = append(days, d)
		}
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, 0, err
	}
	return s.changeCampaign(ctx, mp, id, ifMatch, func(c *Campaign) {
		for _, d := range days {
			i := slices.IndexFunc(c.Timetables, func(x TimetableDay) bool { return x.DayOfWeek == d.DayOfWeek })
			if i >= 0 {
				c.Timetables[i] = d
			} else {
				c.Timetables = append(c.Timetables, d)
			}
		}
		slices.SortFunc(c.Timetables, func(a, b TimetableDay) int { return a.DayOfWeek - b.DayOfWeek })
	})
}

// DeleteTimetables removes days of c's timetable (all of them when days is
// empty): a campaign without a timetable serves every hour.
func (s *Service) DeleteTimetables(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, days []int) (Campaign, int64, error) {
	return s.changeCampaign(ctx, mp, id, ifMatch, func(c *Campaign) {
		if len(days) == 0 {
			c.Timetables = nil
			return
		}
		c.Timetables = slices.DeleteFunc(c.Timetables, func(x TimetableDay) bool { return slices.Contains(days, x.DayOfWeek) })
		if len(c.Timetables) == 0 {
			c.Timetables = nil
		}
	})
}

// ParseDaysOfWeek reads the day_of_week query values of DELETE
// …/timetables (comma-separated and/or repeated, 1–7).
func ParseDaysOfWeek(values []string) ([]int, error) {
	var errs validation.Errors
	var days []int
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			switch {
			case err != nil:
				errs.Add("int_parsing", "Input should be a valid integer, unable to parse string as an integer", "query", timetableDayOfWeekField)
			case n < 1 || n > timetableDays:
				errs.Add("less_than_equal", "Input should be between 1 (Monday) and 7 (Sunday)", "query", timetableDayOfWeekField)
			case !slices.Contains(days, n):
				days = append(days, n)
			}
		}
	}
	return days, errs.Err()
}

func timetableDay(t TimetableInput, errs *validation.Errors, loc ...any) (TimetableDay, bool) {
	n := len(*errs)
	at := func(field string) []any { return append(slices.Clone(loc), field) }
	field := func(o Opt[int], name string, lo, hi int) int {
		switch {
		case !o.Set:
			errs.Add(validation.Missing, "Field required", at(name)...)
		case o.Null:
			errs.Add("int_type", "Input should be a valid integer", at(name)...)
		case o.V < lo:
			errs.Add("greater_than_equal", "Input should be greater than or equal to "+strconv.Itoa(lo), at(name)...)
		case o.V > hi:
			errs.Add("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(hi), at(name)...)
		}
		return o.V
	}
	d := TimetableDay{
		DayOfWeek: field(t.DayOfWeek, timetableDayOfWeekField, 1, timetableDays),
		StartHour: field(t.StartHour, timetableStartHourField, 0, maxTimetableHour-1),
		EndHour:   field(t.EndHour, timetableEndHourField, 1, maxTimetableHour),
	}
	if len(*errs) == n && d.EndHour <= d.StartHour {
		errs.Add(validation.ValueError, "end_hour must be greater than start_hour (end_hour is exclusive)", at(timetableEndHourField)...)
	}
	return d, len(*errs) == n
}

// changeCampaign applies change to a copy of the campaign and writes it
// (nothing when it changes nothing), with the checks every campaign write
// has: it exists, it is not archived, ifMatch (when not 0) is its version.
func (s *Service) changeCampaign(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, change func(*Campaign)) (Campaign, int64, error) {
	cur, ver, err := s.writableCampaign(mp, id, ifMatch)
	if err != nil {
		return Campaign{}, 0, err
	}
	next := cur
	next.Timetables = slices.Clone(cur.Timetables)
	next.NegativeKeywords = slices.Clone(cur.NegativeKeywords)
	change(&next)
	return s.write(ctx, mp, cur, next, ver)
}

// ---- negative keywords: normalisation and matching ----

// NormalizeNegative is how negative keywords and search queries are
// compared (docs/reference/campaigns.md, Negative keywords): lower case (Unicode);
// every character that is not a letter or a digit separates words; then
// each word of at least 4 characters ending in "s" but not "ss" loses that
// "s" (a plural and its singular match: "shoes" = "shoe"); words are joined
// with one space. "Running-Shoes!" is "running shoe".
func NormalizeNegative(s string) string {
	buf := make([]byte, 0, len(s))
	word := 0 // runes in the current word
	end := func() {
		if word >= minPluralFoldRunes && buf[len(buf)-1] == 's' && buf[len(buf)-2] != 's' {
			buf = buf[:len(buf)-1]
		}
		word = 0
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if word == 0 && len(buf) > 0 {
				buf = append(buf, ' ')
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			word++
			continue
		}
		if word > 0 {
			end()
		}
	}
	if word > 0 {
		end()
	}
	return string(buf)
}

// Negatives is a compiled list of negative keywords: what the auction
// matches, once per campaign (or bid) and auction, against the normalised
// searchQuery (Query).
type Negatives struct {
	exact  []string // normalised keywords
	phrase []string // " " + normalised keyword + " "
}

// CompileNegatives compiles negative keywords (nil when there are none).
func CompileNegatives(list []NegativeKeyword) *Negatives {
	if len(list) == 0 {
		return nil
	}
	n := &Negatives{}
	for _, k := range list {
		if k.MatchType == MatchPhrase {
			n.phrase = append(n.phrase, " "+k.Keyword+" ")
		} else {
			n.exact = append(n.exact, k.Keyword)
		}
	}
	return n
}

// Query is a searchQuery normalised for negative keywords, once per
// auction.
type Query struct {
	norm   string // NormalizeNegative of the query
	padded string // " " + norm + " "
}

// NewQuery normalises a searchQuery.
func NewQuery(searchQuery string) Query {
	n := NormalizeNegative(searchQuery)
	return Query{norm: n, padded: " " + n + " "}
}

// Empty reports whether the query has no words (no negative keyword
// matches it).
func (q Query) Empty() bool { return q.norm == "" }

// Blocks reports whether a negative keyword of n matches q: an exact one
// when it is the whole query, a phrase one when its words appear in the
// query, in order and next to each other. A nil n blocks nothing.
func (n *Negatives) Blocks(q Query) bool {
	if n == nil || q.norm == "" {
		return false
	}
	for _, k := range n.exact {
		if k == q.norm {
			return true
		}
	}
	for _, k := range n.phrase {
		if strings.Contains(q.padded, k) {
			return true
		}
	}
	return false
}

// blocksKeyword reports whether a negative phrase of n is within keyword
// (a keyword bid's target): every query the bid matches then holds the
// phrase, so the bid can never serve.
func (n *Negatives) blocksKeyword(keyword string) (string, bool) {
	if n == nil {
		return "", false
	}
	padded := " " + NormalizeNegative(keyword) + " "
	for _, k := range n.phrase {
		if strings.Contains(padded, k) {
			return strings.TrimSpace(k), true
		}
	}
	return "", false
}

// ---- negative keywords: the API ----

// NegativeKeywordsInput is the body of PUT …/negative-keywords: the whole
// list (it replaces the current one; [] removes them all).
type NegativeKeywordsInput struct {
	NegativeKeywords Opt[[]NegativeKeywordInput] `json:"negativeKeywords"`
}

// NegativeKeywordInput is one negative keyword of a request.
type NegativeKeywordInput struct {
	Keyword   Opt[string] `json:"keyword"`
	MatchType Opt[string] `json:"matchType"`
}

// NegativeKeywordsJSON is a campaign's (or a bid's, BidID set) negative
// keywords on the wire.
type NegativeKeywordsJSON struct {
	CampaignID       string            `json:"campaignId"`
	BidID            *string           `json:"bidId,omitempty"`
	NegativeKeywords []NegativeKeyword `json:"negativeKeywords"`
}

// CampaignNegatives renders c's negative keywords.
func CampaignNegatives(c Campaign) NegativeKeywordsJSON {
	return NegativeKeywordsJSON{CampaignID: c.ID, NegativeKeywords: orEmpty(c.NegativeKeywords)}
}

// BidNegatives renders b's negative keywords.
func BidNegatives(b Bid) NegativeKeywordsJSON {
	id := b.ID
	return NegativeKeywordsJSON{CampaignID: b.CampaignID, BidID: &id, NegativeKeywords: orEmpty(b.NegativeKeywords)}
}

// negativeKeywords validates and normalises a list: keywords normalised
// (NormalizeNegative), duplicates (same keyword and match type) dropped,
// sorted by keyword then match type.
func negativeKeywords(in NegativeKeywordsInput) ([]NegativeKeyword, error) {
	var errs validation.Errors
	var out []NegativeKeyword
	switch {
	case !in.NegativeKeywords.Set:
		errs.Add(validation.Missing, "Field required", "body", negativeKeywordsBodyName)
	case in.NegativeKeywords.Null:
		errs.Add("list_type", "Input should be a valid list", "body", negativeKeywordsBodyName)
	case len(in.NegativeKeywords.V) > MaxNegativeKeywords:
		errs.Add("too_long", "List should have at most "+strconv.Itoa(MaxNegativeKeywords)+" items", "body", negativeKeywordsBodyName)
	default:
		for i, k := range in.NegativeKeywords.V {
			loc := func(f string) []any { return []any{"body", negativeKeywordsBodyName, i, f} }
			mt := strings.ToLower(strings.TrimSpace(k.MatchType.V))
			switch {
			case !k.MatchType.Set:
				errs.Add(validation.Missing, "Field required", loc(negativeMatchTypeField)...)
			case k.MatchType.Null || (mt != MatchExact && mt != MatchPhrase):
				errs.Add("enum", "Input should be 'exact' or 'phrase'", loc(negativeMatchTypeField)...)
			}
			var norm string
			switch {
			case !k.Keyword.Set:
				errs.Add(validation.Missing, "Field required", loc(negativeKeywordField)...)
			case k.Keyword.Null:
				errs.Add("string_type", "Input should be a valid string", loc(negativeKeywordField)...)
			case utf8.RuneCountInString(k.Keyword.V) > MaxNegativeKeywordLen:
				errs.Add("string_too_long", "String should have at most "+strconv.Itoa(MaxNegativeKeywordLen)+" characters", loc(negativeKeywordField)...)
			default:
				norm = NormalizeNegative(k.Keyword.V)
				words := strings.Count(norm, " ") + 1
				switch {
				case norm == "":
					errs.Add("string_too_short", "String should have at least 1 letter or digit", loc(negativeKeywordField)...)
				case mt == MatchExact && words > MaxNegativeExactWords:
					errs.Add(validation.ValueError, "a negative exact keyword has at most "+strconv.Itoa(MaxNegativeExactWords)+" words", loc(negativeKeywordField)...)
				case mt == MatchPhrase && words > MaxNegativePhraseWords:
					errs.Add(validation.ValueError, "a negative phrase keyword has at most "+strconv.Itoa(MaxNegativePhraseWords)+" words", loc(negativeKeywordField)...)
				}
			}
			nk := NegativeKeyword{Keyword: norm, MatchType: mt}
			if !slices.Contains(out, nk) {
				out = append(out, nk)
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b NegativeKeyword) int {
		if c := strings.Compare(a.Keyword, b.Keyword); c != 0 {
			return c
		}
		return strings.Compare(a.MatchType, b.MatchType)
	})
	return out, nil
}

// PutCampaignNegatives replaces c's negative keywords. ifMatch, when not
// 0, is the version of the campaign the caller read.
func (s *Service) PutCampaignNegatives(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in NegativeKeywordsInput) (Campaign, int64, error) {
	list, err := negativeKeywords(in)
	if err != nil {
		return Campaign{}, 0, err
	}
	return s.changeCampaign(ctx, mp, id, ifMatch, func(c *Campaign) { c.NegativeKeywords = list })
}

// PutBidNegatives replaces a bid's negative keywords. ifMatch, when not 0,
// is the version of the bid the caller read.
func (s *Service) PutBidNegatives(ctx context.Context, mp, campaignID, bidID string, ifMatch statelog.IfMatch, in NegativeKeywordsInput) (Campaign, Bid, int64, error) {
	c, cur, key, ver, err := s.writableBid(mp, campaignID, bidID, ifMatch)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	list, err := negativeKeywords(in)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	if slices.Equal(list, cur.NegativeKeywords) {
		return c, cur, ver, nil
	}
	next := cur
	next.NegativeKeywords = list
	next.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
	v, err := s.bids.Put(ctx, mp, key, ver, next)
	if err != nil {
		return Campaign{}, Bid{}, 0, err
	}
	return c, next, v, nil
}

// negativeIneligibility: a keyword bid that a negative phrase of its
// campaign or of its own contains can never serve.
func negativeIneligibility(c Campaign, b Bid) (Ineligibility, bool) {
	if b.TargetType != TargetKeyword || (len(c.NegativeKeywords) == 0 && len(b.NegativeKeywords) == 0) {
		return Ineligibility{}, false
	}
	if k, ok := CompileNegatives(c.NegativeKeywords).blocksKeyword(b.Target); ok {
		return Ineligibility{ReasonNegativeKeyword, "the campaign's negative phrase keyword \"" + k + "\" is within the keyword " + b.Target + ": every search it matches is excluded"}, true
	}
	if k, ok := CompileNegatives(b.NegativeKeywords).blocksKeyword(b.Target); ok {
		return Ineligibility{ReasonNegativeKeyword, "the bid's negative phrase keyword \"" + k + "\" is within its keyword " + b.Target + ": every search it matches is excluded"}, true
	}
	return Ineligibility{}, false
}

// ReplaceTimetables makes days c's whole timetable (none: every hour is
// served), with PutTimetables' rules for each day: the console's form,
// which shows all seven days at once.
func (s *Service) ReplaceTimetables(ctx context.Context, mp, id string, ifMatch statelog.IfMatch, in []TimetableInput) (Campaign, int64, error) {
	var errs validation.Errors
	var days []TimetableDay
	seen := map[int]bool{}
	for i, t := range in {
		d, ok := timetableDay(t, &errs, "body", "timetables", i)
		if !ok {
			continue
		}
		if seen[d.DayOfWeek] {
			errs.Add(validation.ValueError, "day_of_week "+strconv.Itoa(d.DayOfWeek)+" is given twice", "body", "timetables", i, timetableDayOfWeekField)
			continue
		}
		seen[d.DayOfWeek] = true
		days = append(days, d)
	}
	if err := errs.Err(); err != nil {
		return Campaign{}, 0, err
	}
	slices.SortFunc(days, func(a, b TimetableDay) int { return a.DayOfWeek - b.DayOfWeek })
	return s.changeCampaign(ctx, mp, id, ifMatch, func(c *Campaign) { c.Timetables = days })
}

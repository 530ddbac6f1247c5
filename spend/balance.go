package spend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Vendor balances (docs/reference/balances.md). A vendor of a marketplace that uses
// balances has funds in one Redis hash,
//
//	ec:bal:{<vendor tag>}:<mp>:<vendor>   c → credited (the sum of its top-ups), l → credit limit,
//	                                      lv → the credit limit's version, s → drawn (charged),
//	                                      !f → the refusal hint, u:<top-up id> → that top-up's amount
//
// and its charges' draws are remembered in hashes of the vendor and the
// auction hour, ec:bm:{<vendor tag>}:<epoch> (field: the charge key → the
// owner; "!f" + owner when refused for funds; "~" + owner when drawn and
// given back because the campaign step did not apply the charge), expiring
// with the charge markers. Its available funds are c + l − s; a draw never
// takes s over c + l.
//
// The vendor's keys carry the vendor's hash tag, not the campaign's: on a
// Redis Cluster the campaign step (ApplyCharges) and the vendor step are two
// atomic scripts, possibly on two masters. ApplyFundedCharges orders them so
// that the vendor is never drawn beyond its funds: draw first (refused when
// the funds do not cover it), then the campaign step for the drawn charges,
// then the draws of the charges the campaign step did not apply are given
// back. Each step is idempotent through its markers, so a replay after a
// crash between any two steps ends in the same state.

// MaxFunds bounds a vendor's credited funds and its credit limit, each, in
// micro-units (10⁹ currency units): their sum, and so every draw, stays
// below 2⁵³, where the script's numbers are exact.
const MaxFunds int64 = 1_000_000_000_000_000

// ChargeRefusedFunds: the vendor's available funds (credited + credit limit
// − drawn) did not cover the charge; nothing moved. The refusal is recorded
// in the vendor's draw marker: the same Owner again gets ChargeRefusedFunds
// whatever the funds have become, another Owner ChargeDuplicate. It is
// returned by ApplyFundedCharges only.
const ChargeRefusedFunds ChargeOutcome = 16

// NoChargeInsufficientBalance: the charge would have taken the vendor's
// drawn funds over its balance plus its credit limit.
const NoChargeInsufficientBalance NoCharge = "insufficient_balance"

// VendorTag is the Redis Cluster hash tag of vendor vendorID of marketplace
// mp, as Tag is a campaign's ("v" and the ids, so that a vendor and a
// campaign with the same id do not share it).
func VendorTag(mp, vendorID string) string {
	h := sha256.New()
	h.Write([]byte("v"))
	h.Write([]byte{0})
	h.Write([]byte(mp))
	h.Write([]byte{0})
	h.Write([]byte(vendorID))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0])[:12])
}

// FundsKey is the Redis hash of vendor vendorID's funds in marketplace mp.
func FundsKey(mp, vendorID string) string {
	return "ec:bal:{" + VendorTag(mp, vendorID) + "}:" + mp + ":" + vendorID
}

// DrawMarkerKey is the hash of vendor vendorID's draw markers of epoch.
func DrawMarkerKey(mp, vendorID string, epoch int64) string {
	return "ec:bm:{" + VendorTag(mp, vendorID) + "}:" + strconv.FormatInt(epoch, 10)
}

// Funds is what a vendor's funds hash holds.
type Funds struct {
	Credited    int64 // the sum of its top-ups
	CreditLimit int64 // how far below zero its balance may go
	Drawn       int64 // the sum of its charges
	// Hint is the drawn sum the last charge refused for funds would have
	// made (0: none): above Credited + CreditLimit at the time.
	Hint int64
}

// Balance is what the vendor has paid and not spent (negative: on credit).
func (f Funds) Balance() int64 { return f.Credited - f.Drawn }

// Available is what charges may still draw: balance plus credit limit.
func (f Funds) Available() int64 { return f.Credited + f.CreditLimit - f.Drawn }

// Out says whether the vendor's campaigns stop serving: nothing is left, or
// the last charge refused for funds would still not fit.
func (f Funds) Out() bool {
	return f.Available() <= 0 || f.Hint > f.Credited+f.CreditLimit
}

var errVendor = errors.New("balance: empty vendor id")

// validVendor accepts any vendor id but the empty one: the vendor's keys
// begin with its hash tag, so braces in the id do not change their slot.
func validVendor(id string) error {
	if id == "" {
		return errVendor
	}
	return nil
}

// ReadFunds reads vendor vendorID's funds as Redis has them now.
func ReadFunds(ctx context.Context, rdb redis.UniversalClient, mp, vendorID string) (Funds, error) {
	v, err := rdb.HMGet(ctx, FundsKey(mp, vendorID), "c", "l", "s", "!f").Result()
	if err != nil {
		return Funds{}, fmt.Errorf("balance: read funds of vendor %q: %w", vendorID, err)
	}
	return parseFunds(FundsKey(mp, vendorID), v)
}

// ReadFundsOf reads the funds of several vendors in one pipelined round
// trip (a page of them), in the order of vendorIDs.
func ReadFundsOf(ctx context.Context, rdb redis.UniversalClient, mp string, vendorIDs []string) ([]Funds, error) {
	cmds := make([]*redis.SliceCmd, len(vendorIDs))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range vendorIDs {
			cmds[i] = p.HMGet(ctx, FundsKey(mp, id), "c", "l", "s", "!f")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("balance: read funds of %d vendors: %w", len(vendorIDs), err)
	}
	out := make([]Funds, len(vendorIDs))
	for i, c := range cmds {
		f, err := parseFunds(FundsKey(mp, vendorIDs[i]), c.Val())
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

func parseFunds(key string, v []any) (Funds, error) {
	var n [4]int64
	for i, x := range v {
		if x == nil {
			continue
		}
		s, _ := x.(string)
		var err error
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return Funds{}, fmt.Errorf("balance: %s holds %q, not an integer", key, s)
		}
	}
	return Funds{Credited: n[0], CreditLimit: n[1], Drawn: n[2], Hint: n[3]}, nil
}

var topUpScript = redis.NewScript(`
local k, f, m, max = KEYS[1], 'u:' .. ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local had = redis.call('HGET', k, f)
if had then return {0, had} end
local c = tonumber(redis.call('HGET', k, 'c') or '0')
if c + m > max then return {-1, tostring(c)} end
redis.call('HSET', k, f, ARGV[2])
redis.call('HINCRBY', k, 'c', ARGV[2])
return {1, ARGV[2]}
`)

// ErrFundsLimit: a top-up would take a vendor's credited funds over MaxFunds.
var ErrFundsLimit = fmt.Errorf("balance: credited funds may not exceed %d micro-units", MaxFunds)

// ApplyTopUp credits micros to vendor vendorID once for top-up id: a second
// call with the same id (a retry, a replay of the ledger) credits nothing
// and reports false. micros must be positive; a top-up that would take the
// credited funds over MaxFunds is refused with ErrFundsLimit.
func ApplyTopUp(ctx context.Context, rdb redis.UniversalClient, mp, vendorID, id string, micros int64) (bool, error) {
	if err := validMarketplace(mp); err != nil {
		return false, err
	}
	if err := validVendor(vendorID); err != nil {
		return false, err
	}
	if id == "" || micros <= 0 || micros > MaxFunds {
		return false, fmt.Errorf("balance: top-up %q of %d micro-units: an id and 1 to %d micro-units", id, micros, MaxFunds)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	v, err := topUpScript.Run(ctx, rdb, []string{FundsKey(mp, vendorID)}, id, strconv.FormatInt(micros, 10), strconv.FormatInt(MaxFunds, 10)).Slice()
	if err != nil {
		return false, fmt.Errorf("balance: top up vendor %q: %w", vendorID, err)
	}
	switch v[0].(int64) {
	case 1:
		return true, nil
	case -1:
		return false, ErrFundsLimit
	}
	return false, nil
}

var creditLimitScript = redis.NewScript(`
local v = tonumber(redis.call('HGET', KEYS[1], 'lv') or '-1')
if tonumber(ARGV[2]) <= v then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[1], 'lv', ARGV[2])
return 1
`)

// SetCreditLimit sets vendor vendorID's credit limit to micros (0 to
// MaxFunds) unless a version as high as version was set before: the ledger
// replays its changes in order, each with a higher version, so a replay
// leaves the last one. It reports whether it changed the limit.
func SetCreditLimit(ctx context.Context, rdb redis.UniversalClient, mp, vendorID string, micros, version int64) (bool, error) {
	if err := validMarketplace(mp); err != nil {
		return false, err
	}
	if err := validVendor(vendorID); err != nil {
		return false, err
	}
	if micros < 0 || micros > MaxFunds || version < 0 {
		return false, fmt.Errorf("balance: credit limit %d micro-units (0 to %d), version %d", micros, MaxFunds, version)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	n, err := creditLimitScript.Run(ctx, rdb, []string{FundsKey(mp, vendorID)}, strconv.FormatInt(micros, 10), strconv.FormatInt(version, 10)).Int()
	if err != nil {
		return false, fmt.Errorf("balance: set credit limit of vendor %q: %w", vendorID, err)
	}
	return n == 1, nil
}

func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, defaultWriteTimeout)
}

// The draw script: KEYS[1] the vendor's funds hash, KEYS[2..] its draw
// marker hashes; ARGV[1] 'd' (draw, first pass), 'D' (draw, final pass)
// or 'r' (give back), then per charge:
// the index of its marker hash in KEYS, the charge key, the owner, the
// amount, the marker's expiry (Unix seconds). Draw outcomes: 1 drawn, 2
// drawn before by this owner, 3 another owner's, 4 not covered (first pass:
// no marker, nothing moved), 5 refused for funds (final pass, now or
// before, for this owner), 6 drawn and given back before (the campaign step
// did not apply it). Give-back outcomes: 1 given back, 0 nothing to give
// back (not drawn by this owner, or given back already).
var drawScript = redis.NewScript(`
local fk = KEYS[1]
local mode = ARGV[1]
local raw = redis.call('HMGET', fk, 'c', 'l', 's')
local c, l, s = tonumber(raw[1] or '0'), tonumber(raw[2] or '0'), tonumber(raw[3] or '0')
if not c or not l or not s then return redis.error_reply('funds ' .. fk .. ' holds a value that is not a number') end
local s0, hint = s, nil
local expiry = {}
local out = {}
local n = (#ARGV - 1) / 5
for i = 1, n do
  local j = 1 + 5 * (i - 1)
  local mk = KEYS[tonumber(ARGV[j+1])]
  local field, owner, m, t = ARGV[j+2], ARGV[j+3], tonumber(ARGV[j+4]), tonumber(ARGV[j+5])
  local v = redis.call('HGET', mk, field)
  if mode == 'r' then
    if v == owner then
      redis.call('HSET', mk, field, '~' .. owner)
      s = s - m
      out[i] = 1
    else
      out[i] = 0
    end
  elseif not v then
    if s + m <= c + l then
      s = s + m
      redis.call('HSET', mk, field, owner)
      out[i] = 1
    elseif mode == 'd' then
      out[i] = 4
    else
      redis.call('HSET', mk, field, '!f' .. owner)
      if not hint or s + m > hint then hint = s + m end
      out[i] = 5
    end
    if not expiry[mk] or expiry[mk] < t then expiry[mk] = t end
  elseif v == owner then out[i] = 2
  elseif v == '!f' .. owner then out[i] = 5
  elseif v == '~' .. owner then out[i] = 6
  else out[i] = 3 end
end
if s ~= s0 then redis.call('HSET', fk, 's', string.format('%.0f', s)) end
if hint then redis.call('HSET', fk, '!f', string.format('%.0f', hint)) end
for k, t in pairs(expiry) do
  if redis.call('EXPIRETIME', k) < t then redis.call('EXPIREAT', k, t) end
end
return out
`)

// drawOutcome is what the draw script answered for one charge.
type drawOutcome int64

const (
	drawn        drawOutcome = 1
	drawReplayed drawOutcome = 2
	drawOther    drawOutcome = 3
	drawShort    drawOutcome = 4
	drawRefused  drawOutcome = 5
	drawGiven    drawOutcome = 6
)

// funded is one charge of ApplyFundedCharges with its vendor.
type funded struct {
	i      int // position in the caller's charges
	vendor string
}

// drawCalls lays out the draw (mode "d": the first pass, "D": the final
// one) or give-back (mode "r") calls of the charges fs: one call per vendor,
// chargeChunk charges at most. It sorts fs by vendor (keeping the order of
// each vendor's charges): the outcomes are in that order.
func drawCalls(charges []Charge, fs []funded, mode string) []*chargeCall {
	sort.SliceStable(fs, func(a, b int) bool { return fs[a].vendor < fs[b].vendor })
	var calls []*chargeCall
	var call *chargeCall
	var cur string
	for n, f := range fs {
		c := &charges[f.i]
		if call == nil || f.vendor != cur || len(call.idx) == chargeChunk {
			call = &chargeCall{keys: []string{FundsKey(c.MarketplaceID, f.vendor)}, args: []any{mode}, camps: map[string]int{}}
			calls = append(calls, call)
			cur = f.vendor
		}
		mk := DrawMarkerKey(c.MarketplaceID, f.vendor, c.Epoch)
		if call.camps[mk] == 0 {
			call.keys = append(call.keys, mk)
			call.camps[mk] = len(call.keys)
		}
		call.args = append(call.args, strconv.Itoa(call.camps[mk]), c.Key, c.Owner,
			strconv.FormatInt(c.Micros, 10), strconv.FormatInt(c.KeepUntil.Unix(), 10))
		call.idx = append(call.idx, n)
	}
	return calls
}

// runDraws runs the calls of fs and returns one outcome per entry of fs
// (as drawCalls sorted it).
func runDraws(ctx context.Context, rdb redis.UniversalClient, charges []Charge, fs []funded, mode string, replicas int) ([]drawOutcome, error) {
	calls := drawCalls(charges, fs, mode)
	res, err := runChargeCalls(ctx, rdb, drawScript, calls, replicas)
	if err != nil {
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		return nil, err
	}
	out := make([]drawOutcome, len(fs))
	for ci, c := range calls {
		if len(res[ci]) != len(c.idx) {
			return nil, fmt.Errorf("balance: draw script returned %d outcomes for %d charges", len(res[ci]), len(c.idx))
		}
		for j, v := range res[ci] {
			x, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("balance: draw script returned %v", v)
			}
			out[c.idx[j]] = drawOutcome(x)
		}
	}
	return out, nil
}

// ApplyFundedCharges is ApplyCharges for charges of which some draw on a
// vendor's funds: vendors[i] names charge i's vendor ("" for a charge that
// draws on none, as in a marketplace without balances). A funded charge is
// applied only when its vendor's available funds cover it and its campaign's
// budgets allow it; then both the vendor's drawn funds and the campaign's
// spend move by its amount, each once. Otherwise it is refused whole: for
// funds (ChargeRefusedFunds) or for a budget (as ApplyCharges).
//
// Each step is an atomic script per vendor (or campaign) and idempotent:
// the funded charges are drawn from their vendors; the charges drawn, and
// the unfunded ones, go to ApplyCharges; the draws of the charges it did
// not apply (refused for a budget, or another record's) are given back.
// A charge its vendor's funds do not cover on that first pass is left
// undecided (no marker), and decided on a second pass once the first
// pass's draws were given back: drawn (then its campaign step and
// give-back as above) or refused for funds, for good. A call that fails
// part way leaves every step it ran in place, and calling it again with
// the same charges ends where one whole call would have, moving nothing
// twice: a draw is never made twice for one charge key, and a draw is
// given back once. A vendor is never drawn beyond its funds. Between a
// draw and its give-back the vendor's funds read that much lower: among
// the charges of the second pass, one may be refused for funds that a
// charge its campaign then refused held (never over-drawn).
func ApplyFundedCharges(ctx context.Context, rdb redis.UniversalClient, charges []Charge, vendors []string, replicas int) ([]ChargeOutcome, error) {
	if len(vendors) != len(charges) {
		return nil, fmt.Errorf("balance: %d vendors for %d charges", len(vendors), len(charges))
	}
	var fs []funded
	var unfunded []int
	for i, v := range vendors {
		if v == "" {
			unfunded = append(unfunded, i)
			continue
		}
		if err := validVendor(v); err != nil {
			return nil, fmt.Errorf("budget: charge %d: %w", i, err)
		}
		if charges[i].Micros > MaxFunds {
			return nil, fmt.Errorf("budget: charge %d: %d micro-units exceed a vendor's funds", i, charges[i].Micros)
		}
		fs = append(fs, funded{i: i, vendor: v})
	}
	if len(fs) == 0 {
		return ApplyCharges(ctx, rdb, charges, replicas)
	}
	now := time.Now()
	var day string
	for _, f := range fs {
		if err := charges[f.i].validate(now, &day); err != nil {
			return nil, fmt.Errorf("budget: charge %d: %w", f.i, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	out := make([]ChargeOutcome, len(charges))
	for _, mode := range []string{"d", "D"} {
		draws, err := runDraws(ctx, rdb, charges, fs, mode, replicas)
		if err != nil {
			return nil, fmt.Errorf("balance: draw: %w", err)
		}
		var short []funded
		next := unfunded
		unfunded = nil
		for n, f := range fs {
			switch draws[n] {
			case drawRefused:
				out[f.i] = ChargeRefusedFunds
			case drawOther:
				out[f.i] = ChargeDuplicate
			case drawShort:
				short = append(short, f)
			case drawn, drawReplayed, drawGiven:
				// the campaign step decides (again, for a replay: its
				// markers answer as they did)
				next = append(next, f.i)
			default:
				return nil, fmt.Errorf("balance: draw script answered %d", draws[n])
			}
		}
		sort.Ints(next) // a campaign's charges in the order given
		batch := make([]Charge, len(next))
		for n, i := range next {
			batch[n] = charges[i]
		}
		res, err := ApplyCharges(ctx, rdb, batch, replicas)
		if err != nil {
			return nil, err
		}
		var back []funded
		for n, o := range res {
			i := next[n]
			out[i] = o
			if vendors[i] != "" && o != ChargeApplied && o != ChargeReplayed {
				back = append(back, funded{i: i, vendor: vendors[i]})
			}
		}
		if len(back) > 0 {
			if _, err := runDraws(ctx, rdb, charges, back, "r", replicas); err != nil {
				return nil, fmt.Errorf("balance: give back draws: %w", err)
			}
		}
		if len(short) == 0 {
			break
		}
		fs = short
	}
	return out, nil
}

// readFundsMany reads the funds of vendors of mp, pipelined (on a cluster,
// go-redis splits the pipeline by master).
func readFundsMany(ctx context.Context, rdb redis.UniversalClient, mp string, vendorIDs []string) ([]Funds, error) {
	out := make([]Funds, len(vendorIDs))
	for from := 0; from < len(vendorIDs); from += readChunk {
		chunk := vendorIDs[from:min(from+readChunk, len(vendorIDs))]
		pipe := rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(chunk))
		for i, v := range chunk {
			cmds[i] = pipe.HMGet(ctx, FundsKey(mp, v), "c", "l", "s", "!f")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("balance: HMGET of %d funds hashes: %w", len(chunk), err)
		}
		for i, v := range chunk {
			f, err := parseFunds(FundsKey(mp, v), cmds[i].Val())
			if err != nil {
				return nil, err
			}
			out[from+i] = f
		}
	}
	return out, nil
}

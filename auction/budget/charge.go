package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Charge is one charge to apply to a campaign's spend, exactly once.
type Charge struct {
	MarketplaceID string
	// Key names what is charged, unique within the marketplace (the
	// charging pipeline uses the auction winner and the interaction kind,
	// 18 bytes). A second Charge with the same Key never moves spend again.
	// Any bytes; at most MaxChargeKey of them.
	Key string
	// Epoch groups markers: a number that is always the same for one Key
	// (the charging pipeline uses its auction's Unix hour), 0 to MaxEpoch.
	// The markers of one marketplace and Epoch share a set of Redis hashes
	// (see MarkerBucketKey) that expire together. A Key sent once with
	// another Epoch is a different charge.
	Epoch int64
	// Owner names the record that carries the charge (the charging pipeline
	// uses its Kafka partition:offset). The same Key and Owner again is a
	// replay of that record: reported as ChargeReplayed (or as the same
	// refusal), spend unchanged. It may not begin with "!" (the mark of a
	// refused charge's marker).
	Owner      string
	CampaignID string
	Day        string // the local day the spend counts on, YYYY-MM-DD (DayOf)
	Micros     int64  // >= 0; 0 records the charge without moving spend
	// Limits are the campaign's budgets (0: none). The charge is applied
	// only if the campaign's spend of Day plus Micros stays within
	// DailyMicros and its total spend plus Micros within TotalMicros;
	// otherwise it is refused whole (ChargeRefusedTotal, else
	// ChargeRefusedDaily), and the refusal is remembered in its marker like
	// an application. Without a limit, the largest int64 is the limit: a
	// counter never overflows. A negative limit refuses every charge.
	Limits Limits
	// KeepUntil is how long Redis remembers the charge (whole seconds): it
	// must outlast every later record that can carry the same Key, and the
	// replays of this one. Past it, the Key can be charged again. It must
	// be in the future. The hash that holds the marker expires at the
	// latest KeepUntil of the markers in it, so a marker may be kept
	// longer: give the Charges of one Epoch the same KeepUntil where you
	// can (the charging pipeline rounds it to the end of the auction's
	// hour), and the hash's expiry is set once.
	KeepUntil time.Time
	// LegacyMarker, when set, names the string key under which a build
	// from before 2026-11-22 kept this charge's marker (one key per marker,
	// `ec:charged:{mp}:...`). If that key exists, its owner is the owner of
	// record: the charge is replayed or a duplicate, never applied again,
	// and the owner is carried into the hash. The charging pipeline sets it
	// for auctions older than its upgrade (docs/charges.md, Upgrading). It
	// must be in the marketplace's hash tag.
	LegacyMarker string
}

// MaxChargeKey is the longest Charge.Key, in bytes. Keys and owners of up
// to 64 bytes keep the marker hashes in Redis's compact listpack encoding
// (hash-max-listpack-value); a hash with a longer one is stored as a hash
// table, which works the same and takes more memory.
const MaxChargeKey = 256

// MaxEpoch bounds Charge.Epoch (Unix hours reach it in about 10^10 years):
// Lua prints numbers below 10^14 as plain integers, which the key names need.
const MaxEpoch = 1e13

// ChargeOutcome is what ApplyCharges did with one Charge.
type ChargeOutcome uint8

const (
	// ChargeApplied: first time this Key was seen; spend moved by Micros.
	ChargeApplied ChargeOutcome = iota + 1
	// ChargeReplayed: the same Owner applied this Key before (a replay of the
	// same record): nothing moved, and the caller treats it as charged.
	ChargeReplayed
	// ChargeDuplicate: another Owner applied (or was refused) this Key:
	// nothing moved, and the caller treats this one as not charged.
	ChargeDuplicate
	// ChargeRefusedDaily: the charge would have taken the campaign's spend of
	// its Day over Limits.DailyMicros; nothing moved. The refusal is recorded
	// in the marker: the same Owner again gets ChargeRefusedDaily whatever the
	// budget has become, another Owner ChargeDuplicate.
	ChargeRefusedDaily
	// ChargeRefusedTotal: the same for the campaign's total spend and
	// Limits.TotalMicros (checked first: a charge over both is refused for
	// the total).
	ChargeRefusedTotal
)

// Refused says whether the charge was refused for a budget.
func (o ChargeOutcome) Refused() bool { return o == ChargeRefusedDaily || o == ChargeRefusedTotal }

func (o ChargeOutcome) String() string {
	switch o {
	case ChargeApplied:
		return "applied"
	case ChargeReplayed:
		return "replayed"
	case ChargeDuplicate:
		return "duplicate"
	case ChargeRefusedDaily:
		return "refused_daily"
	case ChargeRefusedTotal:
		return "refused_total"
	}
	return "ChargeOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Markers. Which record applied (or was refused) each charge key is
// remembered in Redis hashes, not one string per key: a marker is one field
// (the key) and its value (the owner; "!d" or "!t" and the owner when the
// charge was refused for the daily or the total budget) in a hash of the
// marketplace and epoch,
//
//	ec:cm:{mp}:<epoch>:<bucket>   field Key → Owner | !d Owner | !t Owner, expiring as a whole
//	ec:cm:{mp}:<epoch>:m          b = the epoch's bucket count, n = its markers so far
//
// and the bucket is FNV-1a (32 bits) of the key modulo the bucket count. A
// hash of up to 128 small fields is stored as one listpack: about 40 bytes
// a marker against about 214 for a string key with its own expiry. The
// script picks an epoch's bucket count once, on its first charge, from the
// number of markers the epoch before it got (about MarkersPerBucket a
// bucket, MinMarkerBuckets to MaxMarkerBuckets, a power of two), and stores
// it in the epoch's meta hash: every later charge of the epoch finds the same
// bucket for the same key. The meta hash expires with the last of the
// epoch's buckets.
const (
	MarkersPerBucket = 64
	MinMarkerBuckets = 16
	MaxMarkerBuckets = 1 << 20
)

// MarkerPrefix is the start of the names of marketplace mp's marker hashes.
// They share the marketplace's hash tag with the spend hashes, so one script
// can update all of them (on Redis Cluster too: every key the script builds
// is in the slot of the keys it declares).
func MarkerPrefix(mp string) string { return "ec:cm:{" + mp + "}:" }

// MarkerBucketKey is the hash that holds the marker of key in marketplace
// mp and epoch, when the epoch has buckets buckets.
func MarkerBucketKey(mp string, epoch int64, buckets uint32, key string) string {
	return MarkerPrefix(mp) + strconv.FormatInt(epoch, 10) + ":" + strconv.FormatUint(uint64(keyHash(key)%buckets), 10)
}

// MarkerMetaKey is the hash that holds the bucket count (field b) and the
// number of markers (field n) of marketplace mp's epoch.
func MarkerMetaKey(mp string, epoch int64) string {
	return MarkerPrefix(mp) + strconv.FormatInt(epoch, 10) + ":m"
}

// keyHash is FNV-1a, 32 bits: it spreads keys over an epoch's buckets. The
// script takes it modulo the bucket count, so it must never change.
func keyHash(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h
}

// chargeChunk bounds the charges of one script call: a script blocks Redis
// while it runs (about 3 µs a charge), so a call stays under about 1.5 ms.
const chargeChunk = 500

// chargeArgs is the number of ARGV entries of one charge.
const chargeArgs = 10

// refusedDaily and refusedTotal begin the value of a refused charge's
// marker, followed by its Owner (Owners may not begin with "!").
const (
	refusedDaily = "!d"
	refusedTotal = "!t"
)

// chargeScript applies a chunk of one marketplace's charges atomically.
// KEYS[1] is the total hash, KEYS[1+i] charge i's day hash. ARGV[1] is the
// day hash TTL in seconds, ARGV[2] the marketplace's marker prefix
// (MarkerPrefix), then for charge i, from j = 2 + 10(i-1): ARGV[j+1] owner,
// ARGV[j+2] campaign, ARGV[j+3] micro-units (decimal int64 text),
// ARGV[j+4] the marker's expiry (Unix seconds), ARGV[j+5] epoch, ARGV[j+6]
// key, ARGV[j+7] keyHash(key), ARGV[j+8] its legacy marker key or "",
// ARGV[j+9] the campaign's daily and ARGV[j+10] its total budget (decimal
// int64 text, "0": none). It returns one outcome per charge: 1 applied,
// 2 replayed (same owner), 3 duplicate (another owner), 4 refused for the
// daily budget, 5 refused for the total budget.
//
// First, each spend counter the chunk can move (the campaign's field of
// each day hash and of the total hash) is read once (one HMGET per hash)
// and checked to be an int64: a counter that is not fails the call before
// anything is written. Then one HSETNX per charge claims its marker in its bucket (an
// HGET reads the owner only when it was there already). A new marker's
// charge is applied when the counters' running values plus its amount stay
// within both budgets (the largest int64 when there is none), and they then
// include it; otherwise its marker is set to "!t" or "!d" and the owner
// (refused for the total, checked first, or the daily budget) and nothing
// moves. A marker there already answers: its owner (replayed), "!d"/"!t" and
// its owner (refused again, whatever the budgets are now), anything else
// (duplicate). A charge with a legacy marker key first reads it (GET): when
// it exists, its owner decides, and is copied into the bucket. The bucket
// count of an epoch comes from its meta hash, or is chosen and stored there
// by the first charge of the epoch. At the end, each counter that moved is
// written once (its new value; one HSET per hash), so is the refusal hint of
// each campaign refused in the call (field "!" and the campaign, in the
// hash of the budget that refused it: the spend the last refused charge
// would have made; see Cache.Spend), each day hash that moved gets its
// TTL, and each hash the call touched gets the latest expiry of its markers
// (EXPIRETIME, and EXPIREAT only when that is later).
//
// Lua numbers are doubles, exact only up to 2^53: amounts, counters and
// budgets are int64 values held as two numbers, v = hi * 10^9 + lo with
// 0 <= lo < 10^9, so that sums and comparisons are exact over the whole
// int64 range, and they are read and written as decimal text.
//
// A script runs as one unit: Redis executes it without interleaving and
// persists and replicates its effects together, so a marker is never set
// without its spend, nor spend moved without its marker, and two calls for
// one campaign (two projectors) see each other's spend whole.
var chargeScript = redis.NewScript(`
local W = ` + strconv.Itoa(chargeArgs) + `
local PER, MINB, MAXB = ` + strconv.Itoa(MarkersPerBucket) + `, ` + strconv.Itoa(MinMarkerBuckets) + `, ` + strconv.Itoa(MaxMarkerBuckets) + `
local RD, RT = '` + refusedDaily + `', '` + refusedTotal + `'
local B = 1000000000
local MAXV, MINV = {9223372036, 854775807}, {-9223372037, 145224192}
local prefix = ARGV[2]
local function cmp(a, b)
  if a[1] ~= b[1] then
    if a[1] < b[1] then return -1 end
    return 1
  end
  if a[2] ~= b[2] then
    if a[2] < b[2] then return -1 end
    return 1
  end
  return 0
end
local function parse(s)
  if type(s) ~= 'string' then return nil end
  if #s <= 15 then
    if not string.find(s, '^%-?%d+$') then return nil end
    local n = tonumber(s)
    local hi = math.floor(n / B)
    return {hi, n - hi * B}
  end
  local neg, d = false, s
  if string.sub(s, 1, 1) == '-' then neg, d = true, string.sub(s, 2) end
  if not string.find(d, '^%d+$') then return nil end
  d = string.match(d, '^0*(%d.*)$')
  if #d > 19 then return nil end
  local v
  if #d > 9 then
    v = {tonumber(string.sub(d, 1, #d - 9)), tonumber(string.sub(d, -9))}
  else
    v = {0, tonumber(d)}
  end
  if neg and (v[1] > 0 or v[2] > 0) then
    if v[2] > 0 then v = {-v[1] - 1, B - v[2]} else v = {-v[1], 0} end
  end
  if cmp(v, MAXV) > 0 or cmp(v, MINV) < 0 then return nil end
  return v
end
local function text(v)
  local hi, lo, sign = v[1], v[2], ''
  if hi >= 0 and hi < 9000000 then return string.format('%.0f', hi * B + lo) end
  if hi < 0 then
    sign = '-'
    if lo > 0 then hi, lo = -hi - 1, B - lo else hi = -hi end
  end
  if hi == 0 then return sign .. string.format('%.0f', lo) end
  return sign .. string.format('%.0f', hi) .. string.format('%09.0f', lo)
end
local nums, lims = {}, {}
local function num(s)
  local v = nums[s]
  if not v then
    v = parse(s)
    nums[s] = v
  end
  return v
end
local function lim(s)
  local v = lims[s]
  if not v then
    if s == '0' then v = MAXV else v = parse(s) end
    lims[s] = v
  end
  return v
end
local hashes, horder = {}, {}
local function counter(k, f)
  local h = hashes[k]
  if not h then
    h = {k = k, byf = {}, list = {}}
    hashes[k] = h
    horder[#horder + 1] = h
  end
  local c = h.byf[f]
  if not c then
    c = {f = f, moved = false}
    h.byf[f] = c
    h.list[#h.list + 1] = c
  end
  return c
end
local hints, horder2 = {}, {}
local function hint(k, camp, would)
  if cmp(would, MAXV) > 0 then would = MAXV end
  local id = k .. '\0' .. camp
  local h = hints[id]
  if not h then
    h = {k = k, f = '!' .. camp}
    hints[id] = h
    horder2[#horder2 + 1] = h
  end
  h.v = would
end
local epochs, expiry, days = {}, {}, {}
local function keep(k, t)
  local cur = expiry[k]
  if not cur or cur < t then expiry[k] = t end
end
local function epoch(ep)
  local e = epochs[ep]
  if e then return e end
  local meta = prefix .. ep .. ':m'
  local b = tonumber(redis.call('HGET', meta, 'b'))
  if not b then
    local prev = tonumber(redis.call('HGET', prefix .. string.format('%.0f', tonumber(ep) - 1) .. ':m', 'n')) or 0
    b = MINB
    while b < MAXB and b * PER < prev do b = b * 2 end
    redis.call('HSET', meta, 'b', b)
  end
  e = {meta = meta, b = b, n = 0, p = prefix .. ep .. ':'}
  epochs[ep] = e
  return e
end
local n = #KEYS - 1
local cd, ct = {}, {}
for i = 1, n do
  local camp = ARGV[2 + W * (i - 1) + 2]
  cd[i] = counter(KEYS[1+i], camp)
  ct[i] = counter(KEYS[1], camp)
end
for _, h in ipairs(horder) do
  local fs = {}
  for x, c in ipairs(h.list) do fs[x] = c.f end
  local raw = redis.call('HMGET', h.k, unpack(fs))
  for x, c in ipairs(h.list) do
    c.h, c.l = 0, 0
    if raw[x] then
      local v = parse(raw[x])
      if not v then return redis.error_reply('spend ' .. h.k .. ' field ' .. c.f .. ' holds ' .. raw[x] .. ', not an int64') end
      c.h, c.l = v[1], v[2]
    end
  end
end
local out = {}
for i = 1, n do
  local j = 2 + W * (i - 1)
  local owner = ARGV[j+1]
  local t = tonumber(ARGV[j+4])
  local e = epoch(ARGV[j+5])
  local field = ARGV[j+6]
  local hk = e.p .. string.format('%.0f', tonumber(ARGV[j+7]) % e.b)
  keep(hk, t)
  keep(e.meta, t)
  local legacy = false
  if ARGV[j+8] ~= '' then legacy = redis.call('GET', ARGV[j+8]) end
  if legacy then
    redis.call('HSETNX', hk, field, legacy)
    if legacy == owner then out[i] = 2 else out[i] = 3 end
  elseif redis.call('HSETNX', hk, field, owner) == 1 then
    e.n = e.n + 1
    local m, c, d = num(ARGV[j+3]), ct[i], cd[i]
    local th, tl = c.h + m[1], c.l + m[2]
    if tl >= B then th, tl = th + 1, tl - B end
    local dh, dl = d.h + m[1], d.l + m[2]
    if dl >= B then dh, dl = dh + 1, dl - B end
    local lt, ld = lim(ARGV[j+10]), lim(ARGV[j+9])
    if th > lt[1] or (th == lt[1] and tl > lt[2]) then
      redis.call('HSET', hk, field, RT .. owner)
      hint(KEYS[1], ARGV[j+2], {th, tl})
      out[i] = 5
    elseif dh > ld[1] or (dh == ld[1] and dl > ld[2]) then
      redis.call('HSET', hk, field, RD .. owner)
      hint(KEYS[1+i], ARGV[j+2], {dh, dl})
      days[KEYS[1+i]] = true
      out[i] = 4
    else
      if m[1] > 0 or m[2] > 0 then
        c.h, c.l, c.moved = th, tl, true
        d.h, d.l, d.moved = dh, dl, true
        days[KEYS[1+i]] = true
      end
      out[i] = 1
    end
  else
    local v = redis.call('HGET', hk, field)
    if v == owner then out[i] = 2
    elseif v == RD .. owner then out[i] = 4
    elseif v == RT .. owner then out[i] = 5
    else out[i] = 3 end
  end
end
for _, h in ipairs(horder) do
  local fv = {}
  for _, c in ipairs(h.list) do
    if c.moved then
      fv[#fv + 1] = c.f
      fv[#fv + 1] = text({c.h, c.l})
    end
  end
  if #fv > 0 then redis.call('HSET', h.k, unpack(fv)) end
end
for _, h in ipairs(horder2) do redis.call('HSET', h.k, h.f, text(h.v)) end
for dk in pairs(days) do redis.call('EXPIRE', dk, ARGV[1]) end
for _, e in pairs(epochs) do
  if e.n > 0 then redis.call('HINCRBY', e.meta, 'n', e.n) end
end
for k, t in pairs(expiry) do
  if redis.call('EXPIRETIME', k) < t then redis.call('EXPIREAT', k, t) end
end
return out
`)

// ApplyCharges applies every charge exactly once, within its campaign's
// budgets, and returns one outcome per charge, in order. For each charge, in
// one atomic Redis step: if no marker exists for its Key (in its marketplace
// and Epoch), it sets the marker (kept at least until KeepUntil) and, when
// the campaign's spend of Day and of all time plus Micros stay within
// Limits, adds Micros to both (the same hashes as AddSpend, whose day hash
// expiry it renews); otherwise the charge is refused whole and the marker
// says so. If the marker exists it changes nothing and reports what it
// says: applied by the same Owner (replayed), refused for the same Owner
// (refused again, whatever the budgets are now), or set by another Owner
// (duplicate).
//
// Calling it again with the same charges (a retry after an error, a replay
// after a crash) moves nothing twice and decides nothing differently: an
// error leaves every charge either decided with its marker or not decided
// at all. Charges are grouped by marketplace and sent in chunks of 500, all
// in one pipelined round trip; within a marketplace they are decided in
// the order given, so when a budget runs out the earlier charges are the
// ones applied. Two charges with the same Key in one call: the first one
// wins.
//
// When ctx has no deadline the call is bounded by ten seconds.
func ApplyCharges(ctx context.Context, rdb redis.UniversalClient, charges []Charge) ([]ChargeOutcome, error) {
	out := make([]ChargeOutcome, len(charges))
	if len(charges) == 0 {
		return out, nil
	}
	now := time.Now()
	for i := range charges {
		if err := charges[i].validate(now); err != nil {
			return nil, fmt.Errorf("budget: charge %d: %w", i, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	calls := chargeCalls(charges)
	res, err := runChargeCalls(ctx, rdb, calls)
	if err != nil && isNoScript(err) {
		// Redis lost its script cache (restart, SCRIPT FLUSH): load the
		// script and send every call again. Safe: a call that did run the
		// first time finds its markers and reports its charges as replayed,
		// which callers treat as charged.
		if err = chargeScript.Load(ctx, rdb).Err(); err == nil {
			res, err = runChargeCalls(ctx, rdb, calls)
		}
	}
	if err != nil {
		return nil, err
	}
	for ci, c := range calls {
		vals := res[ci]
		if len(vals) != len(c.idx) {
			return nil, fmt.Errorf("budget: charge script returned %d outcomes for %d charges", len(vals), len(c.idx))
		}
		for j, v := range vals {
			n, ok := v.(int64)
			if !ok || n < int64(ChargeApplied) || n > int64(ChargeRefusedTotal) {
				return nil, fmt.Errorf("budget: charge script returned %v", v)
			}
			out[c.idx[j]] = ChargeOutcome(n)
		}
	}
	return out, nil
}

func (c *Charge) validate(now time.Time) error {
	if err := validMarketplace(c.MarketplaceID); err != nil {
		return err
	}
	switch {
	case c.Key == "":
		return errors.New("empty charge key")
	case c.LegacyMarker != "" && !strings.HasPrefix(c.LegacyMarker, "ec:charged:{"+c.MarketplaceID+"}:"):
		return fmt.Errorf("legacy marker %q is not a marker key of marketplace %s", c.LegacyMarker, c.MarketplaceID)
	case len(c.Key) > MaxChargeKey:
		return fmt.Errorf("charge key of %d bytes (at most %d)", len(c.Key), MaxChargeKey)
	case c.Epoch < 0 || c.Epoch > MaxEpoch:
		return fmt.Errorf("epoch %d out of range (0 to %d)", c.Epoch, int64(MaxEpoch))
	case c.Owner == "":
		return errors.New("empty owner")
	case c.Owner[0] == '!':
		return fmt.Errorf("owner %q begins with \"!\"", c.Owner)
	case c.CampaignID == "":
		return errors.New("empty campaign id")
	case c.CampaignID[0] == '!':
		return fmt.Errorf("campaign id %q begins with \"!\" (the mark of a refusal hint)", c.CampaignID)
	case c.Micros < 0:
		return fmt.Errorf("negative amount %d", c.Micros)
	case c.KeepUntil.Unix() <= now.Unix():
		return fmt.Errorf("marker expiry %s is not in the future", c.KeepUntil.UTC().Format(time.RFC3339))
	}
	return validDay(c.Day)
}

// chargeCall is one script call: charges of one marketplace.
type chargeCall struct {
	keys []string
	args []any
	idx  []int // positions in the caller's slice
}

// chargeCalls groups charges by marketplace (keeping their order within
// it) and cuts each group into chunks.
func chargeCalls(charges []Charge) []*chargeCall {
	dayTTL := strconv.FormatInt(int64(DayTTL/time.Second), 10)
	var calls []*chargeCall
	open := map[string]*chargeCall{}
	for i := range charges {
		c := &charges[i]
		call := open[c.MarketplaceID]
		if call == nil || len(call.idx) == chargeChunk {
			call = &chargeCall{keys: []string{TotalKey(c.MarketplaceID)}, args: []any{dayTTL, MarkerPrefix(c.MarketplaceID)}}
			open[c.MarketplaceID] = call
			calls = append(calls, call)
		}
		call.keys = append(call.keys, DayKey(c.MarketplaceID, c.Day))
		call.args = append(call.args, c.Owner, c.CampaignID, strconv.FormatInt(c.Micros, 10), strconv.FormatInt(c.KeepUntil.Unix(), 10),
			strconv.FormatInt(c.Epoch, 10), c.Key, strconv.FormatUint(uint64(keyHash(c.Key)), 10), c.LegacyMarker,
			strconv.FormatInt(c.Limits.DailyMicros, 10), strconv.FormatInt(c.Limits.TotalMicros, 10))
		call.idx = append(call.idx, i)
	}
	return calls
}

// runChargeCalls sends every call (EVALSHA) in one pipeline and returns each
// call's outcomes.
func runChargeCalls(ctx context.Context, rdb redis.UniversalClient, calls []*chargeCall) ([][]any, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = chargeScript.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("budget: apply charges: %w", err)
	}
	out := make([][]any, len(calls))
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("budget: apply charges: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

func isNoScript(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOSCRIPT")
}

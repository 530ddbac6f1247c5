package spend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/storage/redisstore"
)

// Charge is one charge to apply to a campaign's spend, exactly once.
type Charge struct {
	MarketplaceID string
	// Key names what is charged, unique within the campaign (the charging
	// pipeline uses the auction winner and the interaction kind, 18 bytes:
	// a winner belongs to one campaign). A second Charge of the campaign
	// with the same Key never moves spend again. Any bytes; at most
	// MaxChargeKey of them.
	Key string
	// Epoch groups markers: a number that is always the same for one Key
	// (the charging pipeline uses its auction's Unix hour), 0 to MaxEpoch.
	// The markers of one campaign and Epoch share a set of Redis hashes
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
	// Earlier layouts (docs/design/charges.md, Upgrading), on one Redis server
	// only (a cluster never held them; both are ignored there):
	//
	// MarketplaceMarkers, when set, makes the charge also honour a marker
	// kept in the marketplace's marker hashes of the builds before
	// 2026-11-26 (ec:cm:{mp}:<epoch>:<bucket>, sized by the epoch's
	// ec:cm:{mp}:<epoch>:m). LegacyMarker, when set, names the string key
	// under which a build from before 2026-11-22 kept this charge's marker
	// (one key per marker, `ec:charged:{mp}:...`). If such a marker
	// exists, what it says decides (its owner replays, another record is a
	// duplicate, a refusal is refused again), never applied again, and it
	// is carried into the campaign's hash. The charging pipeline sets them
	// for auctions older than the upgrade to this layout.
	MarketplaceMarkers bool
	LegacyMarker       string
	// Click, when set, judges the charge by the invalid-click rules first
	// (JudgeClick, on the state the script keeps in the campaign's slot):
	// an invalid click takes its marker, moves nothing, and is refused with
	// its rule's outcome (ChargeInvalidNoImpression and the others), which
	// its marker remembers like a budget refusal. A valid one counts in the
	// shopper's state and goes on to the budgets.
	Click *ClickCheck
	// Impression, when set, makes this entry the record of a winner's
	// impression that the click rules read, not a charge: Key is the
	// winner's ImpressionKey and ImpressionAtMs when it occurred; the
	// earliest recorded stays, in the Epoch's marker hashes (so kept as
	// long as KeepUntil). Micros, Limits and the earlier layouts are
	// ignored; the outcome is ChargeRecorded.
	Impression     bool
	ImpressionAtMs int64
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

// ChargeRefusedWeekly and ChargeRefusedMonthly: the charge would have taken
// the campaign's spend of the local week (month) of its Day over
// Limits.WeeklyMicros (MonthlyMicros); nothing moved, and the refusal is
// recorded in the marker as ChargeRefusedDaily's is. The budgets are
// checked in the order total, monthly, weekly, daily: a charge over several
// is refused for the first.
const (
	ChargeRefusedWeekly  ChargeOutcome = ChargeRefusedFunds + 1
	ChargeRefusedMonthly ChargeOutcome = ChargeRefusedFunds + 2
)

// Refused says whether the charge was refused for a budget.
func (o ChargeOutcome) Refused() bool {
	return o == ChargeRefusedDaily || o == ChargeRefusedTotal || o == ChargeRefusedWeekly || o == ChargeRefusedMonthly
}

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
	case ChargeRefusedWeekly:
		return "refused_weekly"
	case ChargeRefusedMonthly:
		return "refused_monthly"
	case ChargeRefusedFunds:
		return "refused_funds"
	case ChargeInvalidNoImpression, ChargeInvalidTooFast, ChargeInvalidRepeat, ChargeInvalidRate:
		return string(Refusal(o))
	case ChargeRecorded:
		return "recorded"
	}
	return "ChargeOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Markers. Which record applied (or was refused) each charge key is
// remembered in Redis hashes, not one string per key: a marker is one field
// (the key) and its value (the owner; "!d" or "!t" and the owner when the
// charge was refused for the daily or the total budget) in a hash of the
// campaign and epoch,
//
//	ec:cm:{tag}:<epoch>:<bucket>   field Key → Owner | !d Owner | !t Owner, expiring as a whole
//
// where {tag} is the campaign's hash tag (Tag), and the bucket is FNV-1a
// (32 bits) of the key modulo the epoch's bucket count. A hash of up to 128
// small fields is stored as one listpack: about 40 bytes a marker against
// about 214 for a string key with its own expiry. The script picks an
// epoch's bucket count once, on its first charge, from the number of
// markers the campaign's epoch before it got (about MarkersPerBucket a
// bucket, MinMarkerBuckets to MaxMarkerBuckets, a power of two), and keeps
// it, with the epoch's number of markers so far, in the field "" of bucket
// 0 ("<buckets>:<markers>"; no Key is empty): every later charge of the
// epoch finds the same bucket for the same key, and a campaign with few
// charges an hour has one hash an hour. Bucket 0 expires with the last of
// the epoch's markers. The campaign's hash tag puts its markers in the slot
// of its spend hash (SpendKey).
const (
	MarkersPerBucket = 64
	MinMarkerBuckets = 1
	MaxMarkerBuckets = 1 << 20
)

// MarkerPrefix is the start of the names of campaign campaignID's marker
// hashes in marketplace mp. They share the campaign's hash tag with its
// spend hash, so one script can update all of them (on Redis Cluster too:
// every key the script builds is in the slot of the keys it declares).
func MarkerPrefix(mp, campaignID string) string { return "ec:cm:{" + Tag(mp, campaignID) + "}:" }

// MarkerBucketKey is the hash that holds the marker of key of campaign
// campaignID in marketplace mp and epoch, when the epoch has buckets
// buckets.
func MarkerBucketKey(mp, campaignID string, epoch int64, buckets uint32, key string) string {
	return MarkerPrefix(mp, campaignID) + strconv.FormatInt(epoch, 10) + ":" + strconv.FormatUint(uint64(keyHash(key)%buckets), 10)
}

// MarkerMetaKey is the hash (bucket 0) whose field MarkerMetaField holds
// the bucket count and the number of markers of a campaign's epoch,
// "<buckets>:<markers>".
func MarkerMetaKey(mp, campaignID string, epoch int64) string {
	return MarkerPrefix(mp, campaignID) + strconv.FormatInt(epoch, 10) + ":0"
}

// MarkerMetaField is the field of MarkerMetaKey that describes the epoch.
const MarkerMetaField = ""

// marketplaceMarkerPrefix is the start of the names of marketplace mp's
// marker hashes in the layout of the builds before 2026-11-26: one set of
// hashes per marketplace and epoch, the same buckets, and the bucket count
// in field b of the epoch's hash <prefix><epoch>:m.
func marketplaceMarkerPrefix(mp string) string { return "ec:cm:{" + mp + "}:" }

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

// refusedDaily and refusedTotal begin the value of a refused charge's
// marker, followed by its Owner (Owners may not begin with "!").
const (
	refusedDaily   = "!d"
	refusedTotal   = "!t"
	refusedWeekly  = "!w"
	refusedMonthly = "!m"
)

// ReplicaTimeout bounds the wait for the replicas of a master to hold the
// charges it applied (ApplyCharges with replicas).
const ReplicaTimeout = 2 * time.Second

// ErrUnreplicated means a master applied charges but fewer of its replicas
// than asked acknowledged them within ReplicaTimeout: they may be lost if
// that master fails now. Calling again is safe (the charges come back
// replayed) and waits again.
var ErrUnreplicated = errors.New("budget: charges not acknowledged by the replicas in time")

// chargeScript applies a chunk of charges atomically, the charges of
// campaigns whose keys are all in one slot. KEYS are the spend hashes
// (SpendKey) of the call's campaigns. ARGV[1] is the oldest day whose day
// fields are kept (YYYY-MM-DD), the Monday of its week and its month
// (YYYY-MM), separated by spaces, ARGV[1+k] the marker prefix (MarkerPrefix)
// of the campaign of KEYS[k]. Then what charges share, written once a call
// (chargeProfile): ARGV[2 + #KEYS] the number of profiles, and each
// profile, from a = 3 + #KEYS + 14(p-1): ARGV[a] the index in KEYS of its
// campaign, ARGV[a+1] "s" for the records of impressions
// (Charge.Impression), "c" for charges, "k" for charges judged by the
// click rules, ARGV[a+2] the epoch, ARGV[a+3] the markers' expiry (Unix
// seconds), ARGV[a+4] the day (YYYY-MM-DD), ARGV[a+5] the Monday of its
// week (WeekOf) and ARGV[a+6] its month (MonthOf), ARGV[a+7] the daily,
// ARGV[a+8] the total, ARGV[a+9] the weekly and ARGV[a+10] the monthly
// budget (decimal int64 text, "0": none), ARGV[a+11] the click rules
// (InvalidRules.arg), ARGV[a+12] the expiry of the shoppers' counters
// (Unix seconds), ARGV[a+13] the marketplace's marker prefix in the layout
// before campaign keys or "" (an impression's profile: "" and 0 but its
// campaign, kind, epoch and expiry; a charge's: "" and 0 for the rules).
// Then each charge, from its first argument j: ARGV[j] the index of its
// profile, ARGV[j+1] the key, ARGV[j+2] keyHash(key); an impression's
// ARGV[j+3] its Unix milliseconds (4 arguments); a charge's ARGV[j+3] the
// owner, ARGV[j+4] micro-units (decimal int64 text), ARGV[j+5] its legacy
// marker key or "" (6 arguments); a judged click's also ARGV[j+6] its
// Unix milliseconds, ARGV[j+7] the winner's impression key and ARGV[j+8]
// its keyHash or "", ARGV[j+9] the shopper (10 arguments). It returns one
// outcome per charge, in the order of the arguments: 1
// applied, 2 replayed (same owner), 3 duplicate (another owner), 4 refused
// for the daily budget, 5 refused for the total budget, 6 to 9 refused as
// an invalid click (no impression, too fast, repeat, rate), 10 an
// impression recorded, 17 (18) refused for the weekly (monthly) budget.
//
// First, each spend counter the chunk can move (each campaign's day, week
// and month fields and total field) is read once (one HMGET per campaign) and checked to be
// an int64: a counter that is not fails the call before anything is
// written. Then each charge claims its marker in its bucket: set when
// absent (HSETNX), the owner read only when it was there already (HGET).
// A marker hash (bucket) that the chunk touches more than once (its
// charges' and impressions' keys, its clicks' winners' records) is read
// once instead, one HMGET of those fields, the charges then decided on
// what it holds and on what the charges before them set, and written once
// at the end (one HSET of the fields set); so are the shoppers' counters,
// one HMGET and one HSET for each hour's hash of a campaign. A new marker's
// charge is applied when the counters' running values plus its amount stay
// within the four budgets (the largest int64 when there is none), and they
// then include it; otherwise its marker is set to "!t", "!m", "!w" or "!d"
// and the owner (refused for the first budget crossed, in the order total,
// monthly, weekly, daily) and nothing moves. Every charge moves its day's,
// week's and month's counters whatever budgets it has, so that a budget set
// or changed within a period counts the period's spend before it. A marker there already answers: its owner (replayed), "!d"/"!t"
// and its owner (refused again, whatever the budgets are now), anything
// else (duplicate); a "!n", "!f", "!r" or "!c" marker and its owner
// answers the invalid-click refusal it recorded. A click judged by the
// click rules ("k") is judged when its marker is new, before the
// budgets: the winner's impression record (the earliest impression's
// milliseconds, field ARGV[j+7] of the epoch's bucket) and the shopper's
// counters of the click's UTC hour (hash ec:iv:{tag}:<hour>, fields
// "l:<shopper>" the latest click's milliseconds and "n:<shopper>" the
// clicks decided; the previous hour's "l:" too when the click is within the
// repeat window of its hour's start) decide as JudgeClick does; every new
// click of a shopper moves its counters, the invalid ones too. An
// impression's record ("s") sets its field when absent or when the time
// it holds is later, and decides nothing. A charge with an earlier layout's marker (a legacy
// string key, or the marketplace's marker hashes) first reads it: when it
// exists, what it says decides, and it is copied into the campaign's
// bucket. The bucket count of an epoch comes from field "" of its bucket
// 0, or is chosen by the first charge of the epoch. At the end,
// each counter that moved is written once (its new value; one HSET per
// campaign), so is the refusal hint of each budget refused in the call
// (field "!t", or "!" and the day, week or month field: the spend the last
// refused charge would have made; see Cache.Spend), a campaign that got a
// new day field loses its day fields older than ARGV[1]'s day, its week
// (month) fields of weeks (months) before its week (month), and their
// hints (but those of the call), the
// field "" of each epoch's bucket 0 gets its bucket count and markers (an
// HSET whatever changed: every call writes, so that a WAIT after it covers
// whatever the call found there), and each hash the call touched gets the
// latest expiry of its markers (EXPIRETIME, and EXPIREAT only when that is
// later).
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
local PW = ` + strconv.Itoa(chargeProfileArgs) + `
local PER, MINB, MAXB = ` + strconv.Itoa(MarkersPerBucket) + `, ` + strconv.Itoa(MinMarkerBuckets) + `, ` + strconv.Itoa(MaxMarkerBuckets) + `
local RD, RT, RW, RM = '` + refusedDaily + `', '` + refusedTotal + `', '` + refusedWeekly + `', '` + refusedMonthly + `'
local CODES = {['` + refusedDaily + `'] = 4, ['` + refusedTotal + `'] = 5, ['` + refusedWeekly + `'] = ` + strconv.Itoa(int(ChargeRefusedWeekly)) + `, ['` + refusedMonthly + `'] = ` + strconv.Itoa(int(ChargeRefusedMonthly)) + `, ['` + refusedNoImpression + `'] = 6, ['` + refusedTooFast + `'] = 7, ['` + refusedRepeat + `'] = 8, ['` + refusedRate + `'] = 9}
local MARKS = {[6] = '` + refusedNoImpression + `', [7] = '` + refusedTooFast + `', [8] = '` + refusedRepeat + `', [9] = '` + refusedRate + `'}
local function decided(v, owner)
  if v == owner then return 2 end
  local c = CODES[string.sub(v, 1, 2)]
  if c and string.sub(v, 3) == owner then return c end
  return 3
end
local B = 1000000000
local MAXV, MINV = {9223372036, 854775807}, {-9223372037, 145224192}
local oldest, oldestW, oldestM = string.match(ARGV[1], '^(%S+) (%S+) (%S+)$')
local OLDEST = {d = oldest, w = oldestW, m = oldestM}
local nk = #KEYS
local base = 1 + nk
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
    c = {k = k, f = f, moved = false}
    h.byf[f] = c
    h.list[#h.list + 1] = c
  end
  return c
end
-- The refusal hints, one per counter refused in the call: the spend the
-- last refused charge would have made.
local hints, horder2 = {}, {}
local function hint(c, sh, sl)
  if sh > MAXV[1] or (sh == MAXV[1] and sl > MAXV[2]) then sh, sl = MAXV[1], MAXV[2] end
  local h = hints[c]
  if not h then
    h = {k = c.k, f = '!' .. c.f}
    hints[c] = h
    horder2[#horder2 + 1] = h
  end
  h.h, h.l = sh, sl
end
local epochs, eorder, expiry, pruned = {}, {}, {}, {}
local function keep(k, t)
  local cur = expiry[k]
  if not cur or cur < t then expiry[k] = t end
end
local function described(v)
  if not v then return nil, 0 end
  local b, m = string.match(v, '^(%d+):(%d+)$')
  return tonumber(b), tonumber(m) or 0
end
local function epoch(ki, ep)
  local es = epochs[ki]
  if not es then
    es = {}
    epochs[ki] = es
  end
  local e = es[ep]
  if e then return e end
  local prefix = ARGV[1 + ki]
  local id = prefix .. ep
  local meta = id .. ':0'
  local b, m = described(redis.call('HGET', meta, ''))
  if not b then
    local _, prev = described(redis.call('HGET', prefix .. string.format('%.0f', tonumber(ep) - 1) .. ':0', ''))
    b = MINB
    while b < MAXB and b * PER < prev do b = b * 2 end
  end
  e = {meta = meta, b = b, m = m, n = 0, p = id .. ':', names = {}}
  es[ep] = e
  eorder[#eorder + 1] = e
  return e
end
-- bucket is the name of the hash of epoch e that holds the field of hash h
-- (decimal text).
local function bucket(e, h)
  local x = 0
  if e.b > 1 then x = (h + 0) % e.b end
  local s = e.names[x]
  if not s then
    s = e.p .. string.format('%.0f', x)
    e.names[x] = s
  end
  return s
end
local olds = {}
local function oldMarker(prefix, ep, h, field)
  local id = prefix .. ep
  local b = olds[id]
  if b == nil then
    b = tonumber(redis.call('HGET', id .. ':m', 'b')) or false
    olds[id] = b
  end
  if not b then return false end
  return redis.call('HGET', id .. ':' .. string.format('%.0f', h % b), field)
end
local ruless = {}
local function rulesOf(s)
  local r = ruless[s]
  if not r then
    local req, mind, rep, maxh = string.match(s, '^(%d):(%d+):(%d+):(%d+)$')
    r = {tonumber(req), tonumber(mind), tonumber(rep), tonumber(maxh)}
    ruless[s] = r
  end
  return r
end
-- The profiles, then the items.
local P, PS = {}, {}
local pb = base + 2
for p = 1, tonumber(ARGV[base + 1]) do
  local a = pb + PW * (p - 1)
  local ki = tonumber(ARGV[a])
  local pr = {ki = ki, kind = ARGV[a+1], ep = ARGV[a+2], t = tonumber(ARGV[a+3]), rules = ARGV[a+11], keepc = tonumber(ARGV[a+12]), old = ARGV[a+13]}
  pr.e = epoch(ki, pr.ep)
  if pr.kind ~= 's' then
    local k = KEYS[ki]
    pr.cd, pr.ct, pr.cw, pr.cm = counter(k, 'd:' .. ARGV[a+4]), counter(k, 't'), counter(k, 'w:' .. ARGV[a+5]), counter(k, 'm:' .. ARGV[a+6])
    pr.lims = {lim(ARGV[a+8]), lim(ARGV[a+10]), lim(ARGV[a+9]), lim(ARGV[a+7])}
  end
  P[p], PS[tostring(p)] = pr, pr
end
local WIDTH = {s = 4, c = 6, k = 10}
local IJ, IP = {}, {}
local n = 0
do
  local j, na = pb + PW * #P, #ARGV
  while j <= na do
    n = n + 1
    local pr = PS[ARGV[j]]
    IJ[n], IP[n] = j, pr
    j = j + WIDTH[pr.kind]
  end
end
-- First, what each item touches: its campaign's counters, its marker's
-- bucket (and its winner's impression record's), its shopper's counters.
local IH, IS, ISK, ILF, INF = {}, {}, {}, {}, {}
-- add appends v to lists[k], a list made on k's first add and k then
-- appended to order (the keys in the order first added).
local function add(lists, order, k, v)
  local l = lists[k]
  if not l then
    l = {}
    lists[k] = l
    order[#order + 1] = k
  end
  l[#l + 1] = v
end
local tfields, torder = {}, {}
local function touch(hk, f) add(tfields, torder, hk, f) end
local ivps, ivs, ivorder = {}, {}, {}
for i = 1, n do
  local j, pr = IJ[i], IP[i]
  local ki, e = pr.ki, pr.e
  local hk = bucket(e, ARGV[j+2])
  IH[i] = hk
  touch(hk, ARGV[j+1])
  if pr.kind == 'k' then
    if ARGV[j+7] ~= '' then
      local sh = bucket(e, ARGV[j+8])
      IS[i] = sh
      touch(sh, ARGV[j+7])
    end
    local sh = ARGV[j+9]
    if sh ~= '' then
      local ck = ARGV[j+6] + 0
      local hr = math.floor(ck / 3600000)
      local ivp = ivps[ki]
      if not ivp then
        ivp = {p = 'ec:iv:' .. string.sub(ARGV[1 + ki], 7), byh = {}}
        ivps[ki] = ivp
      end
      local sk = ivp.byh[hr]
      if not sk then
        sk = ivp.p .. string.format('%.0f', hr)
        ivp.byh[hr] = sk
      end
      local lf, nf = 'l:' .. sh, 'n:' .. sh
      ISK[i], ILF[i], INF[i] = sk, lf, nf
      local s = ivs[sk]
      if not s then
        s = {k = sk, fs = {}, v = {}, dirty = {}, d = {}}
        ivs[sk] = s
        ivorder[#ivorder + 1] = s
      end
      s.fs[#s.fs + 1] = lf
      s.fs[#s.fs + 1] = nf
    end
  end
end
for _, h in ipairs(horder) do
  local fs = {}
  for x, c in ipairs(h.list) do fs[x] = c.f end
  local raw = redis.call('HMGET', h.k, unpack(fs))
  for x, c in ipairs(h.list) do
    c.h, c.l, c.existed = 0, 0, raw[x] ~= false
    if raw[x] then
      local v = parse(raw[x])
      if not v then return redis.error_reply('spend ' .. h.k .. ' field ' .. c.f .. ' holds ' .. raw[x] .. ', not an int64') end
      c.h, c.l = v[1], v[2]
    end
  end
end
-- A marker hash the call touches more than once is read once (HMGET of
-- the fields it touches) and written once, at the end (one HSET of the
-- fields that changed); one touched once is read and written directly.
local cache, dirty, dorder = {}, {}, {}
for _, hk in ipairs(torder) do
  local fs = tfields[hk]
  if #fs > 1 then
    local raw = redis.call('HMGET', hk, unpack(fs))
    local c = {}
    for x, f in ipairs(fs) do c[f] = raw[x] end
    cache[hk] = c
  end
end
local function mget(hk, f)
  local c = cache[hk]
  if c then return c[f] end
  return redis.call('HGET', hk, f)
end
local function mset(hk, f, v)
  local c = cache[hk]
  if not c then
    redis.call('HSET', hk, f, v)
    return
  end
  c[f] = v
  add(dirty, dorder, hk, f)
end
local function msetnx(hk, f, v)
  if not cache[hk] then return redis.call('HSETNX', hk, f, v) == 1 end
  if cache[hk][f] then return false end
  mset(hk, f, v)
  return true
end
-- The shoppers' counters of the call: read once (one HMGET a hash),
-- written once at the end.
for _, s in ipairs(ivorder) do
  local raw = redis.call('HMGET', s.k, unpack(s.fs))
  for x, f in ipairs(s.fs) do s.v[f] = tonumber(raw[x]) or false end
end
local function ivset(s, f, v)
  if not s.d[f] then
    s.d[f] = true
    s.dirty[#s.dirty + 1] = f
  end
  s.v[f] = v
end
local function judge(i, j, pr, ki)
  local r = rulesOf(pr.rules)
  local req, mind, rep, maxh = r[1], r[2], r[3], r[4]
  local ck = ARGV[j+6] + 0
  local seen = false
  if ARGV[j+7] ~= '' then
    seen = mget(IS[i], ARGV[j+7])
  end
  local bad = 0
  if req == 1 and not seen then bad = 6
  elseif mind > 0 and seen and ck - tonumber(seen) < mind then bad = 7 end
  local sh = ARGV[j+9]
  if sh ~= '' then
    local sk = ISK[i]
    local s = ivs[sk]
    local hr = math.floor(ck / 3600000)
    local lf, nf = ILF[i], INF[i]
    local last, cnt = s.v[lf] or nil, s.v[nf] or 0
    if bad == 0 and rep > 0 then
      local prev = last
      if not prev and ck - hr * 3600000 < rep then
        local psk = ivps[ki].p .. string.format('%.0f', hr - 1)
        local ps = ivs[psk]
        if ps and ps.v[lf] ~= nil then
          prev = ps.v[lf] or nil
        else
          prev = tonumber(redis.call('HGET', psk, lf))
        end
      end
      if prev and math.abs(ck - prev) < rep then bad = 8 end
    end
    if bad == 0 and maxh > 0 and cnt >= maxh then bad = 9 end
    if not last or ck > last then last = ck end
    ivset(s, lf, last)
    ivset(s, nf, cnt + 1)
    keep(sk, pr.keepc)
  end
  return bad
end
local out = {}
local RMARK, RCODE = {RT, RM, RW, RD}, {5, ` + strconv.Itoa(int(ChargeRefusedMonthly)) + `, ` + strconv.Itoa(int(ChargeRefusedWeekly)) + `, 4}
local CS, SH, SL = {}, {}, {}
for i = 1, n do
  local j, pr = IJ[i], IP[i]
  local ki, e = pr.ki, pr.e
  local k = KEYS[ki]
  local field = ARGV[j+1]
  local hk = IH[i]
  keep(hk, pr.t)
  keep(e.meta, pr.t)
  local owner, prior = nil, false
  if pr.kind ~= 's' then
    owner = ARGV[j+3]
    if pr.old ~= '' then prior = oldMarker(pr.old, pr.ep, tonumber(ARGV[j+2]), field) end
    if not prior and ARGV[j+5] ~= '' then prior = redis.call('GET', ARGV[j+5]) end
  end
  local bad = 0
  if pr.kind == 's' then
    local ms = ARGV[j+3]
    if msetnx(hk, field, ms) then
      e.n = e.n + 1
    elseif tonumber(ms) < tonumber(mget(hk, field)) then
      mset(hk, field, ms)
    end
    out[i] = 10
  elseif prior then
    msetnx(hk, field, prior)
    out[i] = decided(prior, owner)
  elseif msetnx(hk, field, owner) then
    e.n = e.n + 1
    if pr.kind == 'k' then bad = judge(i, j, pr, ki) end
  else
    out[i] = decided(mget(hk, field), owner)
  end
  if bad > 0 then
    mset(hk, field, MARKS[bad] .. owner)
    out[i] = bad
  elseif not out[i] then
    local m, d = num(ARGV[j+4]), pr.cd
    -- The counters in the order their budgets are checked: total, month,
    -- week, day; the first over its budget refuses the charge.
    CS[1], CS[2], CS[3], CS[4] = pr.ct, pr.cm, pr.cw, d
    local LS = pr.lims
    local over = nil
    for x = 1, 4 do
      local c, l = CS[x], LS[x]
      local sh, sl = c.h + m[1], c.l + m[2]
      if sl >= B then sh, sl = sh + 1, sl - B end
      SH[x], SL[x] = sh, sl
      if not over and (sh > l[1] or (sh == l[1] and sl > l[2])) then over = x end
    end
    if over then
      mset(hk, field, RMARK[over] .. owner)
      hint(CS[over], SH[over], SL[over])
      if not d.existed then pruned[k] = true end
      out[i] = RCODE[over]
    else
      if m[1] > 0 or m[2] > 0 then
        for x = 1, 4 do
          local c = CS[x]
          c.h, c.l, c.moved = SH[x], SL[x], true
        end
        if not d.existed then pruned[k] = true end
      end
      out[i] = 1
    end
  end
end
for _, hk in ipairs(dorder) do
  local c, fv, done = cache[hk], {}, {}
  for _, f in ipairs(dirty[hk]) do
    if not done[f] then
      done[f] = true
      fv[#fv + 1] = f
      fv[#fv + 1] = c[f]
    end
  end
  redis.call('HSET', hk, unpack(fv))
end
for _, s in ipairs(ivorder) do
  if #s.dirty > 0 then
    local fv = {}
    for _, f in ipairs(s.dirty) do
      fv[#fv + 1] = f
      fv[#fv + 1] = string.format('%.0f', s.v[f])
    end
    redis.call('HSET', s.k, unpack(fv))
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
for _, h in ipairs(horder2) do redis.call('HSET', h.k, h.f, text({h.h, h.l})) end
for k in pairs(pruned) do
  local gone, h = {}, hashes[k]
  for _, f in ipairs(redis.call('HKEYS', k)) do
    local kind, at = string.match(f, '^!?([dwm]):(.+)$')
    if kind and at < OLDEST[kind] and not h.byf[kind .. ':' .. at] then gone[#gone + 1] = f end
  end
  if #gone > 0 then redis.call('HDEL', k, unpack(gone)) end
end
for _, e in ipairs(eorder) do redis.call('HSET', e.meta, '', string.format('%.0f:%.0f', e.b, e.m + e.n)) end
for k, t in pairs(expiry) do
  if redis.call('EXPIRETIME', k) < t then redis.call('EXPIREAT', k, t) end
end
return out
`)

// ApplyCharges applies every charge exactly once, within its campaign's
// budgets, and returns one outcome per charge, in order. For each charge, in
// one atomic Redis step: if no marker exists for its Key (in its campaign
// and Epoch), it sets the marker (kept at least until KeepUntil) and, when
// the campaign's spend of Day and of all time plus Micros stay within
// Limits, adds Micros to both (the same hash as AddSpend); otherwise the
// charge is refused whole and the marker says so. If the marker exists it
// changes nothing and reports what it says: applied by the same Owner
// (replayed), refused for the same Owner (refused again, whatever the
// budgets are now), or set by another Owner (duplicate).
//
// Calling it again with the same charges (a retry after an error, a replay
// after a crash) moves nothing twice and decides nothing differently: an
// error leaves every charge either decided with its marker or not decided
// at all. Charges are ordered by campaign and grouped into script calls of
// up to 500, each call the campaigns of one slot (on a cluster) or any (on
// one server); the calls sent to one master go in one pipelined round
// trip, the masters' at once. Within a campaign they are decided in the
// order given, so when a budget runs out the earlier charges are the ones
// applied. Two charges with the same Key and campaign: the first one wins.
//
// With replicas above 0, the calls sent to a master count only once that
// many of its replicas hold them, or all its replicas when fewer are
// attached (a master that has just taken over from a failed one has none
// until it comes back: endcap_budget_charge_calls_unreplicated_total): a
// WAIT on the connection that ran them, which covers everything the master
// had applied before them too. Fewer acknowledgements within
// ReplicaTimeout return ErrUnreplicated.
//
// When ctx has no deadline the call is bounded by ten seconds.
func ApplyCharges(ctx context.Context, rdb redis.UniversalClient, charges []Charge, replicas int) ([]ChargeOutcome, error) {
	out := make([]ChargeOutcome, len(charges))
	if len(charges) == 0 {
		return out, nil
	}
	now := time.Now()
	var day string // the last day found valid: a batch's charges have few
	for i := range charges {
		if err := charges[i].validate(now, &day); err != nil {
			return nil, fmt.Errorf("budget: charge %d: %w", i, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	cluster := redisstore.IsCluster(rdb)
	calls := chargeCalls(charges, cluster, now)
	res, err := runChargeCalls(ctx, rdb, chargeScript, calls, replicas)
	if err != nil {
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx) // a master may have failed or a slot moved
		}
		return nil, err
	}
	for ci, c := range calls {
		vals := res[ci]
		if len(vals) != len(c.idx) {
			return nil, fmt.Errorf("budget: charge script returned %d outcomes for %d charges", len(vals), len(c.idx))
		}
		for j, v := range vals {
			n, ok := v.(int64)
			if !ok || n < int64(ChargeApplied) || (n > int64(ChargeRecorded) && n != int64(ChargeRefusedWeekly) && n != int64(ChargeRefusedMonthly)) {
				return nil, fmt.Errorf("budget: charge script returned %v", v)
			}
			out[c.idx[j]] = ChargeOutcome(n)
		}
	}
	return out, nil
}

// validate checks c; *day is a day found valid before (validate sets it),
// which c's need not be read again.
func (c *Charge) validate(now time.Time, day *string) error {
	if err := validMarketplace(c.MarketplaceID); err != nil {
		return err
	}
	if err := validCampaign(c.CampaignID); err != nil {
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
	case c.Micros < 0:
		return fmt.Errorf("negative amount %d", c.Micros)
	case c.KeepUntil.Unix() <= now.Unix():
		return fmt.Errorf("marker expiry %s is not in the future", c.KeepUntil.UTC().Format(time.RFC3339))
	case c.Impression && c.Click != nil:
		return errors.New("both an impression record and a click")
	case c.Impression && c.ImpressionAtMs < 0:
		return fmt.Errorf("impression time %d is negative", c.ImpressionAtMs)
	}
	if err := c.Click.validate(); err != nil {
		return fmt.Errorf("click: %w", err)
	}
	if c.Day == *day && c.Day != "" {
		return nil
	}
	if err := validDay(c.Day); err != nil {
		return err
	}
	*day = c.Day
	return nil
}

// chargeCall is one script call: charges of campaigns of one slot (on a
// cluster) or of any (on one server).
type chargeCall struct {
	keys  []string
	args  []any
	idx   []int          // positions in the caller's slice
	camps map[string]int // key → its index in keys (1-based, as in the script); drawCalls'
}

// The constant arguments of a charge, boxed as pointers (go-redis writes
// *string and *int64 as their values): a pointer in an interface costs no
// allocation, a string or an int64 one each.
var (
	argNone       = ""
	argCharge     = "c"
	argClick      = "k"
	argImpression = "s"
)

// chargeCampaign is what chargeCalls computes once per campaign of a batch:
// its spend key and marker prefix (each a SHA-256: Tag) and its slot.
type chargeCampaign struct {
	mp, id      string
	key, prefix string
	slot        int
}

// chargeCalls groups charges into calls: by the slot of their campaign's
// keys on a cluster, all together on one server; orders each group by
// campaign (the charges of a campaign keep their order: within a campaign
// they are decided in the order given), so that a call reads and writes
// each of its campaigns' spend hashes once for many charges; and cuts each
// group into chunks.
//
// The arguments are laid out without a copy or an allocation a charge: the
// charges' own strings and the numbers of a call's arena, as pointers
// (chargeArena.appendArgs); charges must not change until the calls have run.
func chargeCalls(charges []Charge, cluster bool, now time.Time) []*chargeCall {
	oldestDay := DayOf(now.Add(-DayFieldsKept), time.UTC)
	oldest := oldestDay + " " + WeekOf(oldestDay) + " " + MonthOf(oldestDay)
	// The campaigns, once each, in the order of the calls: by slot, then
	// marketplace, then campaign.
	type campaignID struct{ mp, id string }
	index := map[campaignID]int{}
	var camps []chargeCampaign
	of := make([]int, len(charges))
	for i := range charges {
		c := &charges[i]
		k := campaignID{c.MarketplaceID, c.CampaignID}
		n, ok := index[k]
		if !ok {
			n = len(camps)
			index[k] = n
			cc := chargeCampaign{mp: c.MarketplaceID, id: c.CampaignID, key: SpendKey(c.MarketplaceID, c.CampaignID),
				prefix: MarkerPrefix(c.MarketplaceID, c.CampaignID)}
			if cluster {
				cc.slot = redisstore.Slot(cc.key)
			}
			camps = append(camps, cc)
		}
		of[i] = n
	}
	rank := make([]int, len(camps))
	for i := range rank {
		rank[i] = i
	}
	slices.SortFunc(rank, func(a, b int) int {
		ca, cb := &camps[a], &camps[b]
		return cmp.Or(cmp.Compare(ca.slot, cb.slot), strings.Compare(ca.mp, cb.mp), strings.Compare(ca.id, cb.id))
	})
	// The charges by campaign in that order, each campaign's in the order
	// given (a stable counting sort).
	start := make([]int, len(camps)+1)
	pos := make([]int, len(camps)) // campaign → its place in rank
	for p, c := range rank {
		pos[c] = p
	}
	for i := range charges {
		start[pos[of[i]]+1]++
	}
	for p := range camps {
		start[p+1] += start[p]
	}
	order := make([]int, len(charges))
	for i := range charges {
		p := pos[of[i]]
		order[start[p]] = i
		start[p]++
	}
	weeks := map[string]*string{}
	months := map[string]*string{}
	rules := map[InvalidRules]*string{}
	olds := map[string]*string{}
	profiles := map[chargeProfile]int{}
	var plist []chargeProfile
	var pfirst []int // each profile's first charge
	var pix []int    // each charge's profile
	var calls []*chargeCall
	for from := 0; from < len(order); {
		to := from + 1
		for to < len(order) && to-from < chargeChunk && camps[of[order[to]]].slot == camps[of[order[from]]].slot {
			to++
		}
		call := &chargeCall{idx: order[from:to:to]}
		// The campaigns' keys and marker prefixes come before the charges
		// in ARGV, then the profiles the charges name.
		clear(profiles)
		plist, pfirst, pix = plist[:0], pfirst[:0], pix[:0]
		inCall := 0
		for k, i := range call.idx {
			if k == 0 || of[i] != of[call.idx[k-1]] {
				inCall++
			}
			p := profileOf(&charges[i], inCall, cluster, rules)
			if k > 0 && p == plist[pix[k-1]] { // the charges of a campaign often share one
				pix = append(pix, pix[k-1])
				continue
			}
			n, ok := profiles[p]
			if !ok {
				n = len(plist)
				profiles[p] = n
				plist, pfirst = append(plist, p), append(pfirst, i)
			}
			pix = append(pix, n)
		}
		call.keys = make([]string, 0, inCall)
		call.args = make([]any, 0, 2+inCall+chargeProfileArgs*len(plist)+chargeItemArgs*len(call.idx))
		call.args = append(call.args, &oldest)
		for k, i := range call.idx {
			if k == 0 || of[i] != of[call.idx[k-1]] {
				call.keys = append(call.keys, camps[of[i]].key)
				call.args = append(call.args, &camps[of[i]].prefix)
			}
		}
		a := chargeArena{ints: make([]int64, 0, 1+chargeProfileInts*len(plist)+chargeInts*len(call.idx))}
		call.args = append(call.args, a.int(int64(len(plist))))
		first := len(a.ints)
		for n := range plist {
			call.args = a.appendProfile(call.args, n, &plist[n], &charges[pfirst[n]], weeks, months, olds)
		}
		for k, i := range call.idx {
			call.args = a.appendArgs(call.args, &charges[i], &plist[pix[k]], &a.ints[first+chargeProfileInts*pix[k]], cluster)
		}
		calls = append(calls, call)
		from = to
	}
	return calls
}

// chargeProfile is what charges of a call share, written once in its
// arguments (chargeScript): the campaign (its index in the call's KEYS),
// the kind of entry ('s' an impression's record, 'c' a charge, 'k' a
// charge judged by the click rules), the epoch and the markers' expiry,
// and for a charge its day, budgets, the earlier layout's marketplace
// markers, and for a judged click its rules (as the script reads them:
// one string for each InvalidRules of the batch) and the expiry of the
// shopper's counters. Under 128 bytes, a map keeps it in place.
type chargeProfile struct {
	camp   int
	kind   byte
	epoch  int64
	keep   int64
	day    string
	limits Limits
	rules  *string
	until  int64
	old    string // the marketplace whose earlier markers count, or ""
}

// profileOf is the profile of charge c of the call's campaign camp;
// rules holds the batch's click rules as the script reads them.
func profileOf(c *Charge, camp int, cluster bool, rules map[InvalidRules]*string) chargeProfile {
	p := chargeProfile{camp: camp, kind: 's', epoch: c.Epoch, keep: c.KeepUntil.Unix()}
	if c.Impression {
		return p
	}
	p.kind, p.day, p.limits = 'c', c.Day, c.Limits
	if !cluster && c.MarketplaceMarkers {
		p.old = c.MarketplaceID // a cluster never held the earlier layouts
	}
	if c.Click != nil && c.Click.Rules.On() {
		r := rules[c.Click.Rules]
		if r == nil {
			r = new(string)
			*r = c.Click.Rules.arg()
			rules[c.Click.Rules] = r
		}
		p.kind, p.rules, p.until = 'k', r, c.Click.StateUntil.Unix()
	}
	return p
}

// The arguments of a profile, of an entry at most, and the numbers of each.
const (
	chargeProfileArgs = 14
	chargeProfileInts = 9
	chargeItemArgs    = 10
	chargeInts        = 5
)

// chargeArena holds the numbers of a call's arguments, sized for the call
// before the first is taken: the arguments point into it.
type chargeArena struct {
	ints []int64
}

func (a *chargeArena) int(v int64) *int64 {
	a.ints = append(a.ints, v)
	return &a.ints[len(a.ints)-1]
}

// appendProfile appends the chargeProfileArgs arguments of profile p, the
// call's n-th (from 0), whose first charge is c, as the script reads them
// (chargeScript); the first of its chargeProfileInts numbers is its index
// (from 1), which its charges' arguments name. weeks, months and olds hold
// the strings a batch's charges share.
func (a *chargeArena) appendProfile(args []any, n int, p *chargeProfile, c *Charge, weeks, months, olds map[string]*string) []any {
	kind, day, week, month, rule, old := &argImpression, &argNone, &argNone, &argNone, &argNone, &argNone
	if p.kind != 's' {
		kind, day = &argCharge, &c.Day
		if week = weeks[c.Day]; week == nil {
			week = new(string)
			*week = WeekOf(c.Day)
			weeks[c.Day] = week
		}
		if month = months[c.Day]; month == nil {
			month = new(string)
			*month = MonthOf(c.Day)
			months[c.Day] = month
		}
	}
	if p.kind == 'k' {
		kind, rule = &argClick, p.rules
	}
	if p.old != "" {
		if old = olds[p.old]; old == nil {
			old = new(string)
			*old = marketplaceMarkerPrefix(p.old)
			olds[p.old] = old
		}
	}
	a.int(int64(n + 1))
	return append(args, a.int(int64(p.camp)), kind, a.int(p.epoch), a.int(p.keep), day, week, month,
		a.int(p.limits.DailyMicros), a.int(p.limits.TotalMicros), a.int(p.limits.WeeklyMicros), a.int(p.limits.MonthlyMicros),
		rule, a.int(p.until), old)
}

// appendArgs appends the arguments of charge c of profile p (index: the
// profile's index in the call), as the script reads them (chargeScript).
func (a *chargeArena) appendArgs(args []any, c *Charge, p *chargeProfile, index *int64, cluster bool) []any {
	args = append(args, index, &c.Key, a.int(int64(keyHash(c.Key))))
	if p.kind == 's' {
		return append(args, a.int(c.ImpressionAtMs))
	}
	legacy := &c.LegacyMarker
	if cluster {
		legacy = &argNone // a cluster never held the earlier layouts
	}
	args = append(args, &c.Owner, a.int(c.Micros), legacy)
	if p.kind != 'k' {
		return args
	}
	k := c.Click
	var seen, seenHash any = &argNone, &argNone
	if k.Rules.NeedImpressions() {
		seen, seenHash = &k.SeenKey, a.int(int64(keyHash(k.SeenKey)))
	}
	return append(args, a.int(k.AtMs), seen, seenHash, &k.Shopper)
}

// runChargeCalls sends the calls of each master in one pipeline on one
// connection of it (the masters at once), with the WAIT for its replicas
// after them when replicas > 0, and returns each call's outcomes.
func runChargeCalls(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []*chargeCall, replicas int) ([][]any, error) {
	type nodeCalls struct {
		node *redis.Client
		idx  []int
	}
	var nodes []*nodeCalls
	byNode := map[*redis.Client]*nodeCalls{}
	for i, c := range calls {
		node, err := redisstore.MasterFor(ctx, rdb, c.keys[0])
		if err != nil {
			return nil, fmt.Errorf("budget: apply charges: %w", err)
		}
		g := byNode[node]
		if g == nil {
			g = &nodeCalls{node: node}
			byNode[node] = g
			nodes = append(nodes, g)
		}
		g.idx = append(g.idx, i)
	}
	out := make([][]any, len(calls))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for n, g := range nodes {
		wg.Go(func() { errs[n] = runOnMaster(ctx, g.node, script, calls, g.idx, replicas, out) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// runOnMaster runs the calls idx on one connection of node (on a new one
// after a connection failure, as many times as the client retries): the
// script calls pipelined (loading the script once if the server lost it),
// then, when replicas > 0, ROLE and WAIT for min(replicas, the replicas
// attached). Running them again is safe: a call that ran finds its markers
// (its charges come back replayed), and a WAIT on the new connection covers
// it, as every call writes.
func runOnMaster(ctx context.Context, node *redis.Client, script *redis.Script, calls []*chargeCall, idx []int, replicas int, out [][]any) error {
	retries := max(node.Options().MaxRetries, 0)
	loaded := false
	for attempt := 0; ; attempt++ {
		err := runOnConn(ctx, node, script, calls, idx, replicas, out)
		switch {
		case err == nil:
			return nil
		case isNoScript(err) && !loaded:
			// The server lost its scripts (a restart, a replica that took
			// over, SCRIPT FLUSH): load it and send every call again.
			loaded = true
			if err := script.Load(ctx, node).Err(); err != nil {
				return fmt.Errorf("budget: apply charges on %s: load the script: %w", node.Options().Addr, err)
			}
			attempt--
		case attempt < retries && redisstore.ConnectionFailed(ctx, err) && !errors.Is(err, ErrUnreplicated):
		default:
			return fmt.Errorf("budget: apply charges on %s: %w", node.Options().Addr, err)
		}
	}
}

// runOnConn is one attempt of runOnMaster, on one connection.
func runOnConn(ctx context.Context, node *redis.Client, script *redis.Script, calls []*chargeCall, idx []int, replicas int, out [][]any) error {
	conn := node.Conn()
	defer conn.Close()
	cmds := make([]*redis.Cmd, len(idx))
	var role *redis.Cmd
	if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, i := range idx {
			cmds[k] = script.EvalSha(ctx, p, calls[i].keys, calls[i].args...)
		}
		if replicas > 0 {
			role = p.Do(ctx, "ROLE")
		}
		return nil
	}); err != nil {
		return err
	}
	for k, i := range idx {
		v, err := cmds[k].Slice()
		if err != nil {
			return err
		}
		out[i] = v
	}
	if replicas <= 0 {
		return nil
	}
	attached, err := attachedReplicas(role)
	if err != nil {
		return fmt.Errorf("ROLE: %w", err)
	}
	want := min(replicas, attached)
	if attached < replicas {
		telemetry.ChargesUnreplicated.Add(float64(len(idx)))
	}
	if want == 0 {
		return nil
	}
	got, err := conn.Wait(ctx, want, ReplicaTimeout).Result()
	if err != nil {
		return fmt.Errorf("WAIT: %w", err)
	}
	if got < int64(want) {
		return fmt.Errorf("%w: %d of %d replicas within %s", ErrUnreplicated, got, want, ReplicaTimeout)
	}
	return nil
}

// attachedReplicas counts the replicas a master's ROLE reply lists (those
// online).
func attachedReplicas(role *redis.Cmd) (int, error) {
	v, err := role.Slice()
	if err != nil {
		return 0, err
	}
	if len(v) < 3 || v[0] != "master" {
		return 0, fmt.Errorf("not a master: %v", v)
	}
	list, ok := v[2].([]any)
	if !ok {
		return 0, fmt.Errorf("ROLE reply %v", v)
	}
	return len(list), nil
}

func isNoScript(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOSCRIPT")
}

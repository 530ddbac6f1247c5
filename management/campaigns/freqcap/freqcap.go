// Package freqcap counts the impressions and clicks of each shopper with
// each capped campaign and bid, per day, week and month of the
// marketplace, and reads them back for the auction (docs/reference/campaigns.md,
// Restrictions).
//
// The counts of one shopper of one marketplace live in one Redis hash,
// ec:fcap:{<marketplace>:<opaqueUserId>}, whose fields are
//
//	d<YYYYMMDD>:<field>  a count of the day
//	w<YYYYWW>:<field>    a count of the ISO week
//	m<YYYYMM>:<field>    a count of the month
//	o<partition>         the events topic's offset counted up to, by partition
//	p                    the periods the hash keeps (the count script's mark)
//
// where a <field> is <campaign>:<i|c> (the campaign level) or
// <campaign>:<bid>:<i|c> (the bid level). The count script drops the fields
// of periods that are over (an hour after they end), and the hash lives to
// the end of the longest period it holds plus an hour. So the auction reads
// a shopper's counts with one HGETALL, and the count of one event is one
// script, on one master of a Redis Cluster.
//
// The layout before kept a hash per period, ec:fcap:{<mp>:<user>}:d<YYYYMMDD>,
// …:w<YYYYWW>, …:m<YYYYMM>, and the offsets in …:o. A shopper's first count
// in this layout carries the counts of the current periods and the offsets
// over from those hashes and deletes them; those of a shopper not counted
// again expire by themselves, at the end of their period plus an hour.
package freqcap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
)

// The interactions counted, as the last letter of a field.
const (
	Impression = 'i'
	Click      = 'c'
)

// grace is how long a period's counts outlive the period.
const grace = time.Hour

// Store counts and reads the interactions of shoppers.
type Store struct {
	rdb   redis.UniversalClient
	conns conns // Send's (send.go)
}

// New returns a Store on rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Periods are the day, week and month an instant falls in, in a time zone.
type Periods struct {
	Day, Week, Month          string    // the fields' prefixes: d<YYYYMMDD>, w<YYYYWW>, m<YYYYMM>
	DayEnd, WeekEnd, MonthEnd time.Time // when each ends
}

// PeriodsAt returns the periods of t in loc (UTC when nil): the calendar
// day, the ISO week (Monday to Sunday) and the calendar month.
func PeriodsAt(t time.Time, loc *time.Location) Periods {
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wd := (int(day.Weekday()) + 6) % 7 // Monday 0
	s := stampsAt(t, loc)
	return Periods{
		Day:      string(s.day[:]),
		Week:     string(s.week[:]),
		Month:    string(s.month[:]),
		DayEnd:   day.AddDate(0, 0, 1),
		WeekEnd:  day.AddDate(0, 0, 7-wd),
		MonthEnd: time.Date(y, m+1, 1, 0, 0, 0, 0, loc),
	}
}

// stamps are the periods' names of PeriodsAt, without allocating.
type stamps struct {
	day   [9]byte // d20261129
	week  [7]byte // w202648
	month [7]byte // m202611
}

func stampsAt(t time.Time, loc *time.Location) stamps {
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	iy, iw := t.ISOWeek()
	var s stamps
	s.day[0], s.week[0], s.month[0] = 'd', 'w', 'm'
	digits(s.day[1:5], y)
	digits(s.day[5:7], int(m))
	digits(s.day[7:9], d)
	digits(s.week[1:5], iy)
	digits(s.week[5:7], iw)
	copy(s.month[1:], s.day[1:7])
	return s
}

// digits writes n in decimal into b, left-padded with zeros.
func digits(b []byte, n int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}

// Key is the Redis key of a shopper's counts.
func Key(mp, user string) string { return "ec:fcap:{" + mp + ":" + user + "}" }

// CampaignField and BidField name the count of one interaction with a
// campaign, or with one bid of it.
func CampaignField(campaignID string, kind byte) string { return campaignID + ":" + string(kind) }
func BidField(campaignID, bidID string, kind byte) string {
	return campaignID + ":" + bidID + ":" + string(kind)
}

// period is a frequency type's period.
type period uint8

const (
	day period = iota + 1
	week
	month
)

func periodOf(frequency string) period {
	switch frequency {
	case "daily":
		return day
	case "weekly":
		return week
	case "monthly":
		return month
	}
	return 0
}

// Counts are a shopper's counts in the current day, week and month, as
// Store.Read left them. Their memory serves the next Read: a read allocates
// nothing per count. The zero value holds no counts. Not safe for
// concurrent use.
type Counts struct {
	raw  []byte   // the reply, which the entries point into
	buf  []byte   // Pending.Receive's reply, kept for the next
	ents []entry  // the counts of the current periods
	tab  []int32  // the entries by field: entry index + 1, 0 empty (open addressing; a power of two long)
	camp []uint64 // CampaignHash of the entries' campaigns, 0 empty (open addressing; a power of two long)
	key  []byte   // Campaign's and Bid's field
	args [2]any   // the command's
}

// entry is one count: its field in raw, without the period.
type entry struct {
	off, end int32
	per      period
	n        int64
}

// Campaign returns the count of interactions of a kind with a campaign in
// the period of a frequency type ("daily", "weekly", "monthly").
func (c *Counts) Campaign(frequency, campaignID string, kind byte) int64 {
	c.key = append(append(append(c.key[:0], campaignID...), ':'), kind)
	return c.find(periodOf(frequency), c.key)
}

// Bid returns the count of interactions of a kind with a bid of a campaign.
func (c *Counts) Bid(frequency, campaignID, bidID string, kind byte) int64 {
	c.key = append(append(append(append(append(c.key[:0], campaignID...), ':'), bidID...), ':'), kind)
	return c.find(periodOf(frequency), c.key)
}

// CampaignHash is what Has takes for a campaign: computed once per
// campaign (the auction's index keeps it), not once per auction.
func CampaignHash(campaignID string) uint64 { return maphash.String(hashSeed, campaignID) | 1 }

// Has reports whether the counts may hold a count of the campaign of hash
// h (CampaignHash), at either level: false means every count of it is 0,
// without hashing its id. One probe of a small table, for the many capped
// campaigns an auction meets that the shopper has not seen.
func (c *Counts) Has(h uint64) bool {
	if len(c.ents) == 0 {
		return false
	}
	mask := uint64(len(c.camp) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch c.camp[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// Len is the number of counts read (of every period).
func (c *Counts) Len() int { return len(c.ents) }

var hashSeed = maphash.MakeSeed()

func (c *Counts) find(p period, field []byte) int64 {
	if len(c.ents) == 0 {
		return 0
	}
	mask := uint64(len(c.tab) - 1)
	for i := maphash.Bytes(hashSeed, field) & mask; ; i = (i + 1) & mask {
		k := c.tab[i]
		if k == 0 {
			return 0
		}
		if e := &c.ents[k-1]; e.per == p && bytes.Equal(c.raw[e.off:e.end], field) {
			return e.n
		}
	}
}

// reset forgets the counts, keeping the memory.
func (c *Counts) reset() {
	c.raw, c.ents = nil, c.ents[:0]
}

// index builds tab over the entries.
func (c *Counts) index() {
	n := 8
	for n < 2*len(c.ents) {
		n *= 2
	}
	if cap(c.tab) < n {
		c.tab = make([]int32, n)
	} else {
		c.tab = c.tab[:n]
		clear(c.tab)
	}
	mask := uint64(n - 1)
	for k := range c.ents {
		e := &c.ents[k]
		i := maphash.Bytes(hashSeed, c.raw[e.off:e.end]) & mask
		for c.tab[i] != 0 {
			i = (i + 1) & mask
		}
		c.tab[i] = int32(k + 1)
	}
	// The campaigns, as many as the entries at most.
	if cap(c.camp) < n {
		c.camp = make([]uint64, n)
	} else {
		c.camp = c.camp[:n]
		clear(c.camp)
	}
	for k := range c.ents {
		e := &c.ents[k]
		f := c.raw[e.off:e.end]
		if j := bytes.IndexByte(f, ':'); j > 0 {
			f = f[:j]
		}
		h := maphash.Bytes(hashSeed, f) | 1
		i := h & mask
		for c.camp[i] != 0 && c.camp[i] != h {
			i = (i + 1) & mask
		}
		c.camp[i] = h
	}
}

// add keeps the count of raw[off:end], a field of the hash, with value v
// when the field is of one of the periods of s.
func (c *Counts) add(s *stamps, off, end int, v []byte) {
	f := c.raw[off:end]
	var p period
	var n int
	switch {
	case len(f) > len(s.day) && f[len(s.day)] == ':' && bytes.Equal(f[:len(s.day)], s.day[:]):
		p, n = day, len(s.day)
	case len(f) > len(s.week) && f[len(s.week)] == ':' && bytes.Equal(f[:len(s.week)], s.week[:]):
		p, n = week, len(s.week)
	case len(f) > len(s.month) && f[len(s.month)] == ':' && bytes.Equal(f[:len(s.month)], s.month[:]):
		p, n = month, len(s.month)
	default:
		return // another period's, an offset, the mark
	}
	c.ents = append(c.ents, entry{off: int32(off + n + 1), end: int32(end), per: p, n: atoi(v)})
}

// atoi is the integer v holds, 0 when it holds none (as strconv.ParseInt's
// error would be read).
func atoi(v []byte) int64 {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0
	}
	var n int64
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return 0
		}
		n = n*10 + int64(ch-'0')
	}
	if neg {
		return -n
	}
	return n
}

// errRedirect is a MOVED or ASK reply of a Redis Cluster whose slots move.
var errRedirect = errors.New("redirected")

// parse reads raw, the RESP reply of HGETALL (a RESP3 map or a RESP2
// array of fields and values, every one a bulk string), keeping the counts
// of the periods of s. The entries point into raw, which c keeps.
func (c *Counts) parse(raw []byte, s *stamps) error {
	c.reset()
	c.raw = raw
	line, i, err := respLine(raw, 0)
	if err != nil {
		return err
	}
	var pairs int
	switch line[0] {
	case '%':
		pairs, err = respInt(line[1:])
	case '*':
		pairs, err = respInt(line[1:])
		if err == nil && pairs%2 != 0 {
			err = fmt.Errorf("an array of %d elements", pairs)
		}
		pairs /= 2
	case '-':
		if bytes.HasPrefix(line, []byte("-MOVED ")) || bytes.HasPrefix(line, []byte("-ASK ")) {
			return errRedirect
		}
		return fmt.Errorf("redis: %s", line[1:])
	default:
		return fmt.Errorf("a reply of type %q", line[0])
	}
	if err != nil {
		return fmt.Errorf("reply header: %w", err)
	}
	if pairs < 0 || pairs > len(raw)/8 { // a pair is at least "$0\r\n\r\n" twice
		return fmt.Errorf("a reply of %d pairs in %d bytes", pairs, len(raw))
	}
	for range pairs {
		var fo, fe, vo, ve int
		if fo, fe, i, err = respBulk(raw, i); err == nil {
			vo, ve, i, err = respBulk(raw, i)
		}
		if err != nil {
			c.reset()
			return err
		}
		c.add(s, fo, fe, raw[vo:ve])
	}
	if i != len(raw) {
		c.reset()
		return fmt.Errorf("%d bytes after the reply", len(raw)-i)
	}
	c.index()
	return nil
}

// errTruncated: the reply does not end within the bytes given.
var errTruncated = errors.New("a truncated reply")

// replyEnd returns where the reply at the start of b ends: a status, error
// or integer line, or a map or array of bulk strings (HGETALL's);
// errTruncated when b does not hold all of it yet.
func replyEnd(b []byte) (int, error) {
	line, i, err := respLine(b, 0)
	if err != nil {
		return 0, err
	}
	switch line[0] {
	case '+', '-', ':':
		return i, nil
	case '%', '*':
		n, err := respInt(line[1:])
		if err != nil {
			return 0, fmt.Errorf("reply header: %w", err)
		}
		if line[0] == '%' {
			n *= 2
		}
		for range n {
			if _, _, i, err = respBulk(b, i); err != nil {
				return 0, err
			}
		}
		return i, nil
	}
	return 0, fmt.Errorf("a reply of type %q", line[0])
}

// respLine returns the line of b at i, without its CRLF, and where the next
// starts.
func respLine(b []byte, i int) ([]byte, int, error) {
	j := bytes.Index(b[i:], []byte("\r\n"))
	if j < 0 {
		return nil, 0, errTruncated
	}
	if j == 0 {
		return nil, 0, errors.New("an empty line")
	}
	return b[i : i+j], i + j + 2, nil
}

// respBulk reads the bulk string at i: its bytes are b[off:end].
func respBulk(b []byte, i int) (off, end, next int, err error) {
	line, j, err := respLine(b, i)
	if err != nil {
		return 0, 0, 0, err
	}
	if line[0] != '$' {
		return 0, 0, 0, fmt.Errorf("an element of type %q", line[0])
	}
	n, err := respInt(line[1:])
	if err != nil || n < 0 {
		return 0, 0, 0, errors.New("a malformed bulk string")
	}
	if j+n+2 > len(b) {
		return 0, 0, 0, errTruncated
	}
	if b[j+n] != '\r' || b[j+n+1] != '\n' {
		return 0, 0, 0, errors.New("a malformed bulk string")
	}
	return j, j + n, j + n + 2, nil
}

func respInt(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 9 {
		return 0, fmt.Errorf("a length of %q", b)
	}
	n := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("a length of %q", b)
		}
		n = n*10 + int(ch-'0')
	}
	return n, nil
}

// Read reads a shopper's counts in the periods of at into c: one HGETALL,
// whose reply go-redis hands over as it came (RESP), parsed into c's
// memory. On a Redis Cluster moving the shopper's slot (a MOVED or ASK
// reply, which the raw reply does not follow), it reads again with the
// typed command, which does. On an error c holds no counts.
func (s *Store) Read(ctx context.Context, mp, user string, at time.Time, loc *time.Location, c *Counts) error {
	st := stampsAt(at, loc)
	c.args[0], c.args[1] = "hgetall", Key(mp, user)
	cmd := redis.NewRawCmd(ctx, c.args[:]...)
	cmd.SetFirstKeyPos(1)
	_ = s.rdb.Process(ctx, cmd)
	raw, err := cmd.Result()
	c.args[1] = nil
	if err == nil {
		err = c.parse(raw, &st)
		if errors.Is(err, errRedirect) {
			err = s.readTyped(ctx, Key(mp, user), &st, c)
		}
	}
	if err != nil {
		c.reset()
		return fmt.Errorf("%w: frequency caps: reading the counts: %v", errkind.Unavailable, err)
	}
	return nil
}

// readTyped reads the hash with the typed HGETALL.
func (s *Store) readTyped(ctx context.Context, key string, st *stamps, c *Counts) error {
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return err
	}
	c.reset()
	var buf []byte
	type span struct{ off, end int }
	fields := make([]span, 0, len(m))
	values := make([]string, 0, len(m))
	for f, v := range m {
		fields = append(fields, span{len(buf), len(buf) + len(f)})
		buf = append(buf, f...)
		values = append(values, v)
	}
	c.raw = buf
	for i, f := range fields {
		c.add(st, f.off, f.end, []byte(values[i]))
	}
	c.index()
	return nil
}

// Hit is one interaction to count: the record of the events topic it
// came in (Partition, Offset), when it happened and the fields it adds one to.
type Hit struct {
	MP, User  string
	Partition int32
	Offset    int64
	At        time.Time
	Loc       *time.Location
	Fields    []string
}

// countScript counts one hit in a shopper's hash (KEYS[1]): it adds one to
// the fields of ARGV[11..] in the periods of ARGV[4..6] (the hit's day,
// week and month; "" for one that is over), unless the hash says this
// partition (ARGV[1]) was counted up to this offset (ARGV[2]) or beyond: a
// replayed record counts once. The events topic is keyed by marketplace and
// shopper, so a shopper's records come in offset order on one partition.
//
// When ARGV[7], the periods still alive (" d… d… w… w… m… m… ": those of
// now and of an hour ago), differs from the hash's mark p, it first drops
// the fields of other periods and marks it. The hash's TTL is raised to
// ARGV[3], the end of the longest period it can hold.
//
// A hash that does not exist yet takes over the counts of the layout
// before: the hashes of the current day, week and month (KEYS[2..4], named
// ARGV[8..10]) and the offsets (KEYS[5]), which it deletes.
var countScript = redis.NewScript(`
local K = KEYS[1]
local function expire()
  if redis.call('TTL', K) < tonumber(ARGV[3]) then redis.call('EXPIRE', K, ARGV[3]) end
end
if redis.call('EXISTS', K) == 0 then
  for k = 1, 3 do
    local kv = redis.call('HGETALL', KEYS[1 + k])
    for i = 1, #kv, 2 do redis.call('HINCRBY', K, ARGV[7 + k] .. ':' .. kv[i], kv[i + 1]) end
  end
  local kv = redis.call('HGETALL', KEYS[5])
  for i = 1, #kv, 2 do redis.call('HSET', K, 'o' .. kv[i], kv[i + 1]) end
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
end
local last = redis.call('HGET', K, 'o' .. ARGV[1])
if last and tonumber(last) >= tonumber(ARGV[2]) then
  expire()
  return 0
end
if redis.call('HGET', K, 'p') ~= ARGV[7] then
  for _, f in ipairs(redis.call('HKEYS', K)) do
    local c = string.sub(f, 1, 1)
    if c == 'd' or c == 'w' or c == 'm' then
      if not string.find(ARGV[7], ' ' .. string.match(f, '^[^:]*') .. ' ', 1, true) then redis.call('HDEL', K, f) end
    end
  end
  redis.call('HSET', K, 'p', ARGV[7])
end
for k = 4, 6 do
  if ARGV[k] ~= '' then
    for i = 11, #ARGV do redis.call('HINCRBY', K, ARGV[k] .. ':' .. ARGV[i], 1) end
  end
end
redis.call('HSET', K, 'o' .. ARGV[1], ARGV[2])
expire()
return 1
`)

// Count adds the hits, one script each, pipelined (on a cluster, one round
// trip to each master concerned). A hit whose periods are all over counts
// nothing. now is the clock that sets the TTLs and the periods kept.
//
// The script is called by its SHA-1 (EVALSHA), not by its text; when a
// server does not have it (a restart, a replica that took over, SCRIPT
// FLUSH), it is loaded on every master and the hits are sent again, which
// counts none twice (the offsets).
func (s *Store) Count(ctx context.Context, hits []Hit, now time.Time) error {
	err := s.count(ctx, hits, now)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if lerr := countScript.Load(ctx, s.rdb).Err(); lerr != nil {
			return fmt.Errorf("%w: frequency caps: loading the count script: %v", errkind.Unavailable, lerr)
		}
		err = s.count(ctx, hits, now)
	}
	if err != nil {
		return fmt.Errorf("%w: frequency caps: counting: %v", errkind.Unavailable, err)
	}
	return nil
}

// count is one attempt of Count.
func (s *Store) count(ctx context.Context, hits []Hit, now time.Time) error {
	if len(hits) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	n := 0
	ttl := func(end time.Time) int64 {
		if d := end.Add(grace).Sub(now); d > 0 {
			return int64(d/time.Second) + 1
		}
		return 0
	}
	live := func(name string, ttl int64) string {
		if ttl > 0 {
			return name
		}
		return ""
	}
	// The periods of now and of an hour ago, per time zone (one, mostly).
	var (
		lastLoc  *time.Location
		cur, ago Periods
		keep     string
	)
	for _, h := range hits {
		p := PeriodsAt(h.At, h.Loc)
		dt, wt, mt := ttl(p.DayEnd), ttl(p.WeekEnd), ttl(p.MonthEnd)
		if dt == 0 && wt == 0 && mt == 0 {
			continue
		}
		if n == 0 || h.Loc != lastLoc {
			lastLoc = h.Loc
			cur, ago = PeriodsAt(now, h.Loc), PeriodsAt(now.Add(-grace), h.Loc)
			keep = " " + cur.Day + " " + ago.Day + " " + cur.Week + " " + ago.Week + " " + cur.Month + " " + ago.Month + " "
		}
		k := Key(h.MP, h.User)
		args := make([]any, 0, 10+len(h.Fields))
		args = append(args, h.Partition, h.Offset, max(dt, wt, mt, ttl(cur.WeekEnd), ttl(cur.MonthEnd)),
			live(p.Day, dt), live(p.Week, wt), live(p.Month, mt), keep, cur.Day, cur.Week, cur.Month)
		for _, f := range h.Fields {
			args = append(args, f)
		}
		old := k + ":"
		countScript.EvalSha(ctx, pipe, []string{k, old + cur.Day, old + cur.Week, old + cur.Month, old + "o"}, args...)
		n++
	}
	if n == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Erase removes the counts of shoppers (a privacy erasure): their hash,
// and the hashes of the layout before that can still live, those of the
// current and the previous day, week and month (a period's hash expires an
// hour after it ends) and the offsets.
func (s *Store) Erase(ctx context.Context, mp string, users []string, now time.Time) (int64, error) {
	if len(users) == 0 {
		return 0, nil
	}
	cur := PeriodsAt(now, time.UTC)
	prev := []Periods{PeriodsAt(now.AddDate(0, 0, -1), time.UTC), PeriodsAt(now.AddDate(0, 0, -7), time.UTC),
		PeriodsAt(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1), time.UTC)}
	// Periods in any time zone: a marketplace's day is within a day of UTC's.
	var suffixes []string
	for _, p := range append(prev, cur, PeriodsAt(now.AddDate(0, 0, 1), time.UTC)) {
		suffixes = append(suffixes, ":"+p.Day, ":"+p.Week, ":"+p.Month)
	}
	suffixes = append(suffixes, ":o", "")
	var n int64
	for i := 0; i < len(users); i += 1000 {
		pipe := s.rdb.Pipeline()
		var cmds []*redis.IntCmd
		for _, u := range users[i:min(i+1000, len(users))] {
			k := Key(mp, u)
			keys := make([]string, len(suffixes))
			for j, suf := range suffixes {
				keys[j] = k + suf
			}
			cmds = append(cmds, pipe.Unlink(ctx, keys...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return n, fmt.Errorf("%w: frequency caps: erasing: %v", errkind.Unavailable, err)
		}
		for _, c := range cmds {
			n += c.Val()
		}
	}
	return n, nil
}

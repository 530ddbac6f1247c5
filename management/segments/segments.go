// Package segments manages user segments: lists of opaque user ids that
// campaigns target. A segment's metadata (name, description, config and the
// generation of its member set) is event-sourced on the entities log; its
// members live in Redis, one SET per segment generation, so that the auction
// tests the membership of a user in O(1). docs/reference/segments.md describes the
// behaviour; this package owns the Redis keys ec:seg:* and ec:seglock:*.
package segments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/statelog"
)

// Limits and defaults.
const (
	TypeUserList      = "user-list"
	MaxIDLen          = 255
	MaxNameLen        = 255
	MaxDescriptionLen = 1000

	// DefaultMaxFileBytes is the largest upload file accepted unless
	// WithMaxFileBytes says otherwise (1 GiB).
	DefaultMaxFileBytes int64 = 1 << 30
	// DefaultChunkSize is how many ids go to Redis per round trip.
	DefaultChunkSize = 10000
)

var (
	// ErrFileTooLarge: the uploaded file (or its decompressed content) is
	// larger than the maximum.
	ErrFileTooLarge = errors.New("segments: file too large")
	// ErrUploadInProgress: another upload or a delete of the same segment is
	// running.
	ErrUploadInProgress = errkind.New(errkind.Conflict, "another upload or a delete of this segment is in progress; retry when it has finished")
	// ErrUnavailable: Redis, where members live, could not be reached.
	ErrUnavailable = errkind.New(errkind.Unavailable, "the segment's members could not be read or written right now; retry later")
	// ErrRead: the file could not be read to its end (the client went away,
	// or the multipart body is truncated).
	ErrRead = errors.New("segments: could not read the uploaded file")
)

// Config is a segment's configuration.
type Config struct {
	Type string `json:"type"`
}

// state is what the log stores of a segment. Generation names the Redis SET
// that holds the current members.
type state struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Config      Config `json:"config"`
	Generation  string `json:"generation"`
}

// Segment is a segment as the API shows it.
type Segment struct {
	ID          string
	Name        string
	Description string
	Config      Config
	Total       int64 // members, exact (SCARD at read time)
	Version     int64
}

// Input is the body of a create-or-update. Nil means absent.
type Input struct {
	Name        *string
	Description *string
	Config      *ConfigInput
}

// ConfigInput is the config of an Input.
type ConfigInput struct {
	Type *string
}

var _ entityref.Segments = (*Service)(nil)

// Service manages the segments of every marketplace.
type Service struct {
	coll         *statelog.Collection[state]
	rdb          redis.UniversalClient
	maxFileBytes int64
	chunk        int
	leaseTTL     time.Duration
	stagingTTL   time.Duration
	oldGrace     time.Duration
	log          *slog.Logger
	caps         Caps
}

// Option configures a Service.
type Option func(*Service)

// WithMaxFileBytes sets the largest file an upload accepts (default 1 GiB).
func WithMaxFileBytes(n int64) Option { return func(s *Service) { s.maxFileBytes = n } }

// WithChunkSize sets how many ids go to Redis per round trip (default 10,000).
func WithChunkSize(n int) Option { return func(s *Service) { s.chunk = n } }

// WithLogger sets the logger of background clean-ups.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithOldGenerationGrace sets how long the members of a replaced generation
// stay readable (default 2 minutes): long enough for every process's view to
// learn the new generation.
func WithOldGenerationGrace(d time.Duration) Option { return func(s *Service) { s.oldGrace = d } }

// New returns the service and registers the "segment" collection on log
// (call it before the log runs).
func New(log *statelog.Log, rdb redis.UniversalClient, opts ...Option) *Service {
	s := &Service{
		coll:         statelog.NewCollection[state](log, "segment"),
		rdb:          rdb,
		maxFileBytes: DefaultMaxFileBytes,
		chunk:        DefaultChunkSize,
		leaseTTL:     30 * time.Second,
		stagingTTL:   15 * time.Minute,
		oldGrace:     2 * time.Minute,
		log:          slog.Default(),
	}
	for _, o := range opts {
		o(s)
	}
	if s.chunk < 1 {
		s.chunk = DefaultChunkSize
	}
	return s
}

// MaxFileBytes is the largest file an upload accepts.
func (s *Service) MaxFileBytes() int64 { return s.maxFileBytes }

// memberKey is the Redis SET of one generation of a segment's members.
// The marketplace and the segment are the hash tag: a segment's keys (its
// generations and its lock, which one script renews together) share a
// Redis Cluster slot, and the segments of a marketplace spread over the
// cluster (the auction asks about several at once).
func memberKey(mp, id, gen string) string {
	return "ec:seg:{" + mp + ":" + id + "}:" + gen
}

func lockKey(mp, id string) string {
	return "ec:seglock:{" + mp + ":" + id + "}"
}

// marketplaceMemberKey is memberKey in the layout of the builds before
// 2026-11-26, which tagged the keys with the marketplace alone.
func marketplaceMemberKey(mp, id, gen string) string {
	return "ec:seg:{" + mp + "}:" + id + ":" + gen
}

// UpgradeKeys renames the member sets of marketplace mp's segments kept
// under the keys of the builds before 2026-11-26 (marketplaceMemberKey) to
// this build's (memberKey), with their expiry; a set already under the new
// key stays (RENAMENX). It reports how many it renamed. Only one Redis
// server can hold the old keys: on a cluster, it does nothing. Uploads made
// through a process of the earlier build after this ran are not carried
// over (docs/reference/segments.md, Upgrading).
func (s *Service) UpgradeKeys(ctx context.Context, mp string) (int, error) {
	if redisstore.IsCluster(s.rdb) {
		return 0, nil
	}
	renamed := 0
	for after := ""; ; {
		ids, vals, more := s.coll.Page(mp, after, 500, nil)
		if len(ids) == 0 {
			return renamed, nil
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.Exists(ctx, marketplaceMemberKey(mp, id, vals[i].Generation))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return renamed, unavailable(err)
		}
		for i, id := range ids {
			if cmds[i].Val() == 0 {
				continue
			}
			ok, err := s.rdb.RenameNX(ctx, marketplaceMemberKey(mp, id, vals[i].Generation), memberKey(mp, id, vals[i].Generation)).Result()
			if err != nil && !strings.Contains(err.Error(), "no such key") { // gone meanwhile
				return renamed, unavailable(err)
			}
			if ok {
				renamed++
			}
		}
		if !more {
			return renamed, nil
		}
		after = ids[len(ids)-1]
	}
}

func newGeneration() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

func unavailable(err error) error {
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// ValidateID checks a segment id from the path: 1–255 characters of UTF-8.
func ValidateID(id string) error {
	var errs validation.Errors
	switch {
	case id == "":
		errs.Add(validation.TooShort, "String should have at least 1 character", "path", "segment-id")
	case !utf8.ValidString(id):
		errs.Add(validation.Invalid, "Input should be a valid UTF-8 string", "path", "segment-id")
	case utf8.RuneCountInString(id) > MaxIDLen:
		errs.Add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxIDLen)+" characters", "path", "segment-id")
	}
	return errs.Err()
}

func validateInput(in Input) (state, error) {
	var errs validation.Errors
	var st state
	if in.Name == nil {
		errs.Add(validation.Missing, "Field required", "body", "name")
	} else {
		n := strings.TrimSpace(*in.Name)
		switch {
		case n == "":
			errs.Add(validation.TooShort, "String should have at least 1 character", "body", "name")
		case utf8.RuneCountInString(n) > MaxNameLen:
			errs.Add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxNameLen)+" characters", "body", "name")
		}
		st.Name = n
	}
	if in.Description != nil {
		if utf8.RuneCountInString(*in.Description) > MaxDescriptionLen {
			errs.Add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxDescriptionLen)+" characters", "body", "description")
		}
		st.Description = *in.Description
	}
	st.Config = Config{Type: TypeUserList}
	if in.Config != nil {
		switch {
		case in.Config.Type == nil:
			errs.Add(validation.Missing, "Field required", "body", "config", "type")
		case *in.Config.Type != TypeUserList:
			errs.Add("literal_error", "Input should be '"+TypeUserList+"'", "body", "config", "type")
		}
	}
	return st, errs.Err()
}

// current returns a segment and the version a write of it must expect.
// For a segment that does not exist that is the log's version of its key: a
// deleted segment keeps its last version, and a re-created one continues
// from there (so an old ETag never matches the new segment).
func (s *Service) current(mp, id string) (state, int64, bool) {
	st, ver, ok := s.coll.Get(mp, id)
	if !ok {
		ver = s.coll.Log().Version("segment", mp+"/"+id)
	}
	return st, ver, ok
}

// SegmentExists reports whether the marketplace has the segment (in-memory
// view; for entityref.Segments).
func (s *Service) SegmentExists(mp, id string) bool {
	_, _, ok := s.coll.Get(mp, id)
	return ok
}

// IsMember reports whether opaqueUserID is a member of the segment: one
// SISMEMBER on the segment's current generation. A missing segment has no
// members.
func (s *Service) IsMember(ctx context.Context, mp, segmentID, opaqueUserID string) (bool, error) {
	st, _, ok := s.coll.Get(mp, segmentID)
	if !ok {
		return false, nil
	}
	in, err := s.rdb.SIsMember(ctx, memberKey(mp, segmentID, st.Generation), opaqueUserID).Result()
	if err != nil {
		return false, unavailable(err)
	}
	return in, nil
}

// Memberships reports, for each segment of ids, whether opaqueUserID is a
// member: one pipelined round trip for all of them (the auction asks once
// per auction for every segment its candidates target). A missing segment
// has no members.
func (s *Service) Memberships(ctx context.Context, mp, opaqueUserID string, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(ids))
	for i, id := range ids {
		if st, _, ok := s.coll.Get(mp, id); ok {
			cmds[i] = pipe.SIsMember(ctx, memberKey(mp, id, st.Generation), opaqueUserID)
		}
	}
	if pipe.Len() == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable(err)
	}
	for i, c := range cmds {
		if c != nil {
			out[i] = c.Val()
		}
	}
	return out, nil
}

// Get returns one segment with its exact member count.
func (s *Service) Get(ctx context.Context, mp, id string) (Segment, error) {
	if err := ValidateID(id); err != nil {
		return Segment{}, err
	}
	st, ver, ok := s.coll.Get(mp, id)
	if !ok {
		return Segment{}, validation.NotFoundf("segment %s", id)
	}
	n, err := s.rdb.SCard(ctx, memberKey(mp, id, st.Generation)).Result()
	if err != nil {
		return Segment{}, unavailable(err)
	}
	return toSegment(id, st, ver, n), nil
}

func toSegment(id string, st state, ver, total int64) Segment {
	return Segment{ID: id, Name: st.Name, Description: st.Description, Config: st.Config, Total: total, Version: ver}
}

// List returns up to limit segments of a marketplace in id order after the
// id `after`, with their exact member counts, and whether more follow.
func (s *Service) List(ctx context.Context, mp, after string, limit int) ([]Segment, bool, error) {
	ids, vals, more := s.coll.Page(mp, after, limit, nil)
	out := make([]Segment, len(ids))
	if len(ids) == 0 {
		return out, more, nil
	}
	pipe := s.rdb.Pipeline()
	cards := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		cards[i] = pipe.SCard(ctx, memberKey(mp, id, vals[i].Generation))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, false, unavailable(err)
	}
	for i, id := range ids {
		out[i] = toSegment(id, vals[i], s.coll.Log().Version("segment", mp+"/"+id), cards[i].Val())
	}
	return out, more, nil
}

// Put creates or updates a segment's name, description and config. ifMatch
// (0: none) is the version the caller expects. It reports whether the segment
// was created.
func (s *Service) Put(ctx context.Context, mp, id string, in Input, ifMatch statelog.IfMatch) (Segment, bool, error) {
	var errs validation.Errors
	if v, ok := validation.As(ValidateID(id)); ok {
		errs = append(errs, v...)
	}
	next, err := validateInput(in)
	if v, ok := validation.As(err); ok {
		errs = append(errs, v...)
	}
	if len(errs) > 0 {
		return Segment{}, false, errs
	}
	cur, ver, exists := s.current(mp, id)
	if !statelog.Matches(ifMatch, exists, ver) {
		return Segment{}, false, statelog.ErrConflict
	}
	if exists {
		next.Generation = cur.Generation
	} else {
		next.Generation = newGeneration()
	}
	nv, err := s.coll.Put(ctx, mp, id, ver, next)
	if err != nil {
		return Segment{}, false, err
	}
	n, err := s.rdb.SCard(ctx, memberKey(mp, id, next.Generation)).Result()
	if err != nil {
		return Segment{}, false, unavailable(err)
	}
	return toSegment(id, next, nv, n), !exists, nil
}

// Delete removes a segment and its members. It waits for no upload: while
// one runs, it fails with ErrUploadInProgress.
func (s *Service) Delete(ctx context.Context, mp, id string, ifMatch statelog.IfMatch) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if _, _, ok := s.coll.Get(mp, id); !ok {
		return validation.NotFoundf("segment %s", id)
	}
	l, err := s.acquire(ctx, mp, id, "")
	if err != nil {
		return err
	}
	defer l.release()
	st, ver, ok := s.coll.Get(mp, id)
	if !ok {
		return validation.NotFoundf("segment %s", id)
	}
	if !statelog.Matches(ifMatch, true, ver) {
		return statelog.ErrConflict
	}
	if err := s.coll.Delete(ctx, mp, id, ver); err != nil {
		return err
	}
	// The answer waits a second at most for the members' removal.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	key := memberKey(mp, id, st.Generation)
	if _, err := bounded.Call(cctx, func(ctx context.Context) (int64, error) { return s.rdb.Unlink(ctx, key).Result() }, nil); err != nil {
		s.log.Warn("segments: members of a deleted segment not removed", "marketplace", mp, "segment", id, "err", err)
	}
	return nil
}

var (
	// refreshScript extends the lease and, when given, the TTL of the
	// upload's staged generation (so that a slow upload keeps it).
	refreshScript = redis.NewScript(`if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
if #KEYS > 1 then redis.call("PEXPIRE", KEYS[2], ARGV[3]) end
return redis.call("PEXPIRE", KEYS[1], ARGV[2])`)
	releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

// errLeaseLost cancels an upload whose lease expired (another writer may
// have taken the segment).
var errLeaseLost = fmt.Errorf("%w (the upload's lease expired)", ErrUploadInProgress)

// lease is a segment's upload lease (one upload or delete at a time, across
// processes), kept alive until release, with the TTL of the upload's staged
// key when there is one. ctx ends if the lease is lost.
type lease struct {
	ctx     context.Context
	release func()

	mu       sync.Mutex // held while a refresh runs
	keepKeys []string   // the lock key, then the staged key if still kept
}

// unstage stops extending the staged key's TTL; once it returns, no refresh
// can touch that key any more (so PERSIST on it sticks).
func (l *lease) unstage() {
	l.mu.Lock()
	l.keepKeys = l.keepKeys[:1]
	l.mu.Unlock()
}

func (s *Service) acquire(ctx context.Context, mp, id, staged string) (*lease, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	key := lockKey(mp, id)
	l := &lease{keepKeys: []string{key}}
	if staged != "" {
		l.keepKeys = append(l.keepKeys, staged)
	}
	ok, err := s.rdb.SetNX(ctx, key, token, s.leaseTTL).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	if !ok {
		return nil, ErrUploadInProgress
	}
	lctx, cancel := context.WithCancelCause(ctx)
	l.ctx = lctx
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(s.leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.mu.Lock()
				rctx, rcancel := context.WithTimeout(context.Background(), s.leaseTTL/3)
				n, err := refreshScript.Run(rctx, s.rdb, l.keepKeys, token, s.leaseTTL.Milliseconds(), s.stagingTTL.Milliseconds()).Int64()
				rcancel()
				l.mu.Unlock()
				if err == nil && n == 0 {
					cancel(errLeaseLost)
					return
				}
			}
		}
	}()
	l.release = func() {
		close(done)
		<-stopped
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		_ = releaseScript.Run(rctx, s.rdb, []string{key}, token).Err()
	}
	return l, nil
}

// isRetryable reports whether a versioned write lost a race it may retry.
func isRetryable(err error) bool {
	return errors.Is(err, statelog.ErrConflict) || errors.Is(err, redisstore.ErrLocked)
}

// RemoveMembers removes the users ids from every segment of marketplace mp
// (the members of each segment's current generation), a chunk of ids per
// round trip, and returns how many memberships it removed (an erasure:
// docs/operations/privacy.md). A segment uploaded again later holds what its new file
// lists.
func (s *Service) RemoveMembers(ctx context.Context, mp string, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var keys []string
	s.coll.Each(mp, func(id string, st state) bool {
		keys = append(keys, memberKey(mp, id, st.Generation))
		return true
	})
	var removed int64
	for _, key := range keys {
		for i := 0; i < len(ids); i += s.chunk {
			chunk := ids[i:min(i+s.chunk, len(ids))]
			members := make([]any, len(chunk))
			for j, id := range chunk {
				members[j] = id
			}
			n, err := s.rdb.SRem(ctx, key, members...).Result()
			if err != nil {
				return removed, unavailable(err)
			}
			removed += n
		}
	}
	return removed, nil
}

package segments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// Action says what an upload does with the file's ids.
type Action string

// Upload actions.
const (
	ActionAdd     Action = "add"
	ActionRemove  Action = "remove"
	ActionReplace Action = "replace"
)

// ParseAction reads the `action` query parameter (absent or empty: add).
func ParseAction(s string) (Action, error) {
	switch Action(s) {
	case "", ActionAdd:
		return ActionAdd, nil
	case ActionRemove, ActionReplace:
		return Action(s), nil
	}
	return "", validation.New("literal_error", "Input should be 'add', 'remove' or 'replace'", "query", "action")
}

// MaxReportedLines is how many invalid lines an upload reports at most.
const MaxReportedLines = 20

// Upload streams a file of member ids into the segment (see
// docs/reference/segments.md): ids go to Redis in chunks, so memory stays bounded
// whatever the file's size. A segment that does not exist is created (name =
// id). ifMatch (0: none) is the version the caller expects. It returns the
// segment's version.
//
// replace, and any upload that creates the segment, writes a fresh
// generation and switches to it only at the end: a failed upload changes
// nothing. add and remove to an existing segment apply each chunk as it
// comes: when they fail midway, the chunks already applied stay applied
// (sending the same file again completes the operation).
func (s *Service) Upload(ctx context.Context, mp, id string, action Action, file io.Reader, ifMatch statelog.IfMatch) (int64, error) {
	if err := ValidateID(id); err != nil {
		return 0, err
	}
	if _, ver, ok := s.coll.Get(mp, id); !statelog.Matches(ifMatch, ok, ver) {
		return 0, statelog.ErrConflict
	}
	gen := newGeneration()
	l, err := s.acquire(ctx, mp, id, memberKey(mp, id, gen))
	if err != nil {
		return 0, err
	}
	defer l.release()
	st, ver, exists := s.coll.Get(mp, id)
	if !statelog.Matches(ifMatch, exists, ver) {
		return 0, statelog.ErrConflict
	}
	staged := !exists || action == ActionReplace
	// With caps, an add to an existing segment is staged too: the file's
	// ids that are not members go to a set of their own, measured with the
	// segment before any of them becomes a member (capped, below).
	addStaged := !staged && action == ActionAdd && s.caps != (Caps{})
	var write func(ctx context.Context, ids []any) error
	switch {
	case addStaged:
		key, live := memberKey(mp, id, gen), memberKey(mp, id, st.Generation)
		write = func(ctx context.Context, ids []any) error {
			args := append([]any{s.stagingTTL.Milliseconds()}, ids...)
			return stageNewScript.Run(ctx, s.rdb, []string{key, live}, args...).Err()
		}
	case staged:
		if action == ActionRemove {
			break // a new segment has nothing to remove: validate only
		}
		key := memberKey(mp, id, gen)
		write = func(ctx context.Context, ids []any) error {
			pipe := s.rdb.Pipeline()
			pipe.SAdd(ctx, key, ids...)
			pipe.PExpire(ctx, key, s.stagingTTL)
			_, err := pipe.Exec(ctx)
			return err
		}
	case action == ActionAdd:
		key := memberKey(mp, id, st.Generation)
		write = func(ctx context.Context, ids []any) error { return s.rdb.SAdd(ctx, key, ids...).Err() }
	case action == ActionRemove:
		key := memberKey(mp, id, st.Generation)
		write = func(ctx context.Context, ids []any) error { return s.rdb.SRem(ctx, key, ids...).Err() }
	}
	if err := s.stream(l.ctx, file, write); err != nil {
		if staged || addStaged {
			s.discard(ctx, memberKey(mp, id, gen))
		}
		return 0, err
	}
	if staged || addStaged {
		keys := []string{memberKey(mp, id, gen)}
		if addStaged {
			keys = append(keys, memberKey(mp, id, st.Generation))
		}
		u, err := s.measure(l.ctx, keys)
		if err == nil {
			err = s.checkCaps(l.ctx, mp, id, u)
		} else {
			err = unavailable(err)
		}
		if err != nil {
			s.discard(ctx, memberKey(mp, id, gen))
			return 0, err
		}
	}
	if addStaged {
		if err := s.merge(l.ctx, memberKey(mp, id, gen), memberKey(mp, id, st.Generation)); err != nil {
			return 0, err
		}
		s.discard(ctx, memberKey(mp, id, gen))
	}
	if !staged {
		_, ver, _ = s.coll.Get(mp, id) // a PUT may have run meanwhile
		return ver, nil
	}
	l.unstage()
	return s.commit(ctx, mp, id, gen, ifMatch)
}

// stageNewScript adds to KEYS[1] the ids (ARGV[2:]) that are not members
// of KEYS[2] (the segment's members), and sets KEYS[1]'s TTL (ARGV[1] ms).
var stageNewScript = redis.NewScript(`
for i = 2, #ARGV do
  if redis.call("SISMEMBER", KEYS[2], ARGV[i]) == 0 then redis.call("SADD", KEYS[1], ARGV[i]) end
end
redis.call("PEXPIRE", KEYS[1], ARGV[1])
return 1`)

// merge adds the members of staged to live, a chunk a round trip (SSCAN,
// SADD: Redis is never blocked on the whole set). It fails like an add
// that fails midway: the chunks added stay added.
func (s *Service) merge(ctx context.Context, staged, live string) error {
	var cursor uint64
	for {
		ids, next, err := s.rdb.SScan(ctx, staged, cursor, "", int64(s.chunk)).Result()
		if err != nil {
			return unavailable(err)
		}
		if len(ids) > 0 {
			args := make([]any, len(ids))
			for i, id := range ids {
				args[i] = id
			}
			if err := s.rdb.SAdd(ctx, live, args...).Err(); err != nil {
				return unavailable(err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// stream reads the file's ids and hands them to write in chunks, from a
// second goroutine, so that reading the file and writing to Redis overlap.
// At most three chunks exist at a time. After the first invalid line nothing
// more is written; reading goes on to report up to MaxReportedLines lines.
func (s *Service) stream(ctx context.Context, file io.Reader, write func(context.Context, []any) error) error {
	text, err := openFile(file, s.maxFileBytes)
	if err != nil {
		return fileError(err)
	}
	rd := newIDReader(text)

	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	chunks := make(chan []any, 1)
	free := make(chan []any, 3)
	werr := make(chan error, 1)
	go func() {
		var err error
		for c := range chunks {
			if err == nil {
				if err = write(wctx, c); err != nil {
					if cerr := context.Cause(wctx); cerr != nil {
						err = cerr
					} else {
						err = unavailable(err)
					}
					cancel(err)
				}
			}
			clear(c)
			select {
			case free <- c[:0]:
			default:
			}
		}
		werr <- err
	}()
	buf := func() []any {
		select {
		case c := <-free:
			return c
		default:
			return make([]any, 0, s.chunk)
		}
	}
	send := func(c []any) bool {
		select {
		case chunks <- c:
			return true
		case <-wctx.Done():
			return false
		}
	}

	var problems validation.Errors
	var readErr error
	chunk := buf()
	for {
		id, p, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		if p != nil {
			problems = append(problems, p.fieldError())
			if len(problems) >= MaxReportedLines {
				break
			}
			continue
		}
		if len(problems) > 0 || write == nil {
			continue
		}
		chunk = append(chunk, id)
		if len(chunk) >= s.chunk {
			if !send(chunk) {
				break
			}
			chunk = buf()
		}
	}
	if readErr == nil && len(problems) == 0 && len(chunk) > 0 && write != nil {
		send(chunk)
	}
	close(chunks)
	if err := <-werr; err != nil {
		return err
	}
	if readErr != nil {
		return fileError(readErr)
	}
	if len(problems) > 0 {
		return problems
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

func fileError(err error) error {
	switch {
	case errors.Is(err, ErrFileTooLarge):
		return ErrFileTooLarge
	case errors.Is(err, errBadGzip):
		return validation.New(validation.Invalid, "The file starts like gzip data but is not valid gzip", "body", "file")
	}
	return fmt.Errorf("%w: %w", ErrRead, err)
}

// discard removes a staged generation that will not be used, waiting a
// second at most (it expires on its own otherwise).
func (s *Service) discard(ctx context.Context, key string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if _, err := bounded.Call(cctx, func(ctx context.Context) (int64, error) { return s.rdb.Unlink(ctx, key).Result() }, nil); err != nil {
		s.log.Warn("segments: staged members not removed (they expire on their own)", "key", key, "err", err)
	}
}

// commit switches the segment to generation gen (creating the segment when
// it does not exist) and retires the previous generation, within ctx (the
// API's write deadline; the API's write context does not end when the client
// goes away, so it runs even if the client went away after sending the
// whole file) and 30 s at most.
func (s *Service) commit(ctx context.Context, mp, id, gen string, ifMatch statelog.IfMatch) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := memberKey(mp, id, gen)
	if err := s.rdb.Persist(cctx, key).Err(); err != nil {
		s.discard(ctx, key)
		return 0, unavailable(err)
	}
	backoff := retry.New(10*time.Millisecond, 250*time.Millisecond)
	for attempt := 0; ; attempt++ {
		cur, ver, exists := s.current(mp, id)
		if !statelog.Matches(ifMatch, exists, ver) {
			s.discard(ctx, key)
			return 0, statelog.ErrConflict
		}
		next := state{Name: id, Config: Config{Type: TypeUserList}}
		if exists {
			next = cur
		}
		next.Generation = gen
		nv, err := s.coll.Put(cctx, mp, id, ver, next)
		if err == nil {
			if exists && cur.Generation != gen {
				s.retire(mp, id, cur.Generation)
			}
			return nv, nil
		}
		if isRetryable(err) && attempt < 50 {
			if retry.Sleep(cctx, backoff.Next()) == nil {
				continue
			}
		}
		if errors.Is(err, statelog.ErrUnavailable) {
			// The record may still land: keep the members rather than risk
			// a segment whose generation has none.
			s.log.Warn("segments: generation switch not confirmed; staged members kept", "key", key, "err", err)
			return 0, err
		}
		s.discard(ctx, key)
		return 0, err
	}
}

// retire makes a replaced generation expire after the grace period, during
// which other processes, whose views may still name it, read the old members;
// it then unlinks it (UNLINK frees a large set without blocking Redis; the
// expiry is the fallback if this process stops first).
func (s *Service) retire(mp, id, gen string) {
	key := memberKey(mp, id, gen)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.oldGrace <= 0 {
		_ = s.rdb.Unlink(ctx, key).Err()
		return
	}
	if err := s.rdb.PExpire(ctx, key, s.oldGrace).Err(); err != nil {
		s.log.Warn("segments: replaced members not scheduled for removal", "key", key, "err", err)
	}
	time.AfterFunc(s.oldGrace, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.rdb.Unlink(ctx, key).Err()
	})
}

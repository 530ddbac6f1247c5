package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
)

// Session is a signed-in user's session, kept in Redis under the SHA-256 of
// its token (the cookie's value): whoever reads Redis cannot use a session.
type Session struct {
	UserID string `json:"u"`
	// CSRF is the token every form of the session carries.
	CSRF    string `json:"c"`
	Created int64  `json:"t"` // unix seconds
	Epoch   int64  `json:"e"` // the user's epoch when the session began
}

// Sessions keeps sessions in Redis. A session ends after Idle without a
// request, after Absolute in any case, at sign-out, and when its user's
// epoch moves (password changed, user disabled).
type Sessions struct {
	rdb      redis.UniversalClient
	Idle     time.Duration
	Absolute time.Duration
	now      func() time.Time
}

// Default session lifetimes.
const (
	DefaultIdle     = 12 * time.Hour
	DefaultAbsolute = 7 * 24 * time.Hour
)

// NewSessions returns sessions in rdb with the given lifetimes (0: the
// defaults).
func NewSessions(rdb redis.UniversalClient, idle, absolute time.Duration) *Sessions {
	if idle <= 0 {
		idle = DefaultIdle
	}
	if absolute <= 0 {
		absolute = DefaultAbsolute
	}
	return &Sessions{rdb: rdb, Idle: idle, Absolute: absolute, now: time.Now}
}

// ErrUnavailable means Redis did not answer.
var ErrUnavailable = errkind.New(errkind.Unavailable, "sessions cannot be read right now; retry in a moment")

func sessionKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "ec:console:session:" + hex.EncodeToString(sum[:])
}

// RandomToken returns 32 random bytes, base64url.
func RandomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Create opens a session for u and returns its token.
func (s *Sessions) Create(ctx context.Context, u User) (string, Session, error) {
	token := RandomToken()
	sess := Session{UserID: u.ID, CSRF: RandomToken(), Created: s.now().Unix(), Epoch: u.Epoch}
	b, _ := json.Marshal(sess)
	if err := s.rdb.Set(ctx, sessionKey(token), b, s.Idle).Err(); err != nil {
		return "", Session{}, errors.Join(ErrUnavailable, err)
	}
	return token, sess, nil
}

// Get returns the live session of token (and extends it by Idle); ok is
// false when there is none, or it is past its absolute lifetime.
func (s *Sessions) Get(ctx context.Context, token string) (Session, bool, error) {
	if token == "" || len(token) > 100 {
		return Session{}, false, nil
	}
	key := sessionKey(token)
	b, err := s.rdb.GetEx(ctx, key, s.Idle).Bytes()
	if errors.Is(err, redis.Nil) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, errors.Join(ErrUnavailable, err)
	}
	var sess Session
	if json.Unmarshal(b, &sess) != nil || s.now().Unix()-sess.Created > int64(s.Absolute/time.Second) {
		_ = s.rdb.Del(ctx, key).Err()
		return Session{}, false, nil
	}
	return sess, true, nil
}

// Delete ends the session of token.
func (s *Sessions) Delete(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	return s.rdb.Del(ctx, sessionKey(token)).Err()
}

// ChoiceTTL is how long a sign-in that matched accounts on several
// marketplaces waits for the user to pick one.
const ChoiceTTL = 5 * time.Minute

// choice is the accounts a sign-in matched, kept under the SHA-256 of the
// token the choosing form carries.
type choice struct {
	Users  []string `json:"u"`
	Epochs []int64  `json:"e"`
}

func choiceKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "ec:console:choice:" + hex.EncodeToString(sum[:])
}

// SaveChoice keeps the accounts a sign-in matched (their password, or a
// single sign-on, checked) until the user picks one, and returns the token
// of the choice. It can be taken once, within ChoiceTTL.
func (s *Sessions) SaveChoice(ctx context.Context, us []User) (string, error) {
	var c choice
	for _, u := range us {
		c.Users, c.Epochs = append(c.Users, u.ID), append(c.Epochs, u.Epoch)
	}
	token := RandomToken()
	b, _ := json.Marshal(c)
	if err := s.rdb.Set(ctx, choiceKey(token), b, ChoiceTTL).Err(); err != nil {
		return "", errors.Join(ErrUnavailable, err)
	}
	return token, nil
}

// TakeChoice returns, and forgets, the accounts of a choice: user id →
// its epoch when the sign-in checked it. ok is false when there is no such
// choice (expired, taken, or never made).
func (s *Sessions) TakeChoice(ctx context.Context, token string) (map[string]int64, bool, error) {
	if token == "" || len(token) > 100 {
		return nil, false, nil
	}
	b, err := s.rdb.GetDel(ctx, choiceKey(token)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, errors.Join(ErrUnavailable, err)
	}
	var c choice
	if json.Unmarshal(b, &c) != nil || len(c.Users) != len(c.Epochs) {
		return nil, false, nil
	}
	out := make(map[string]int64, len(c.Users))
	for i, id := range c.Users {
		out[id] = c.Epochs[i]
	}
	return out, true, nil
}

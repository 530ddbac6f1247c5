// Package privacy erases shoppers on request: a deletion request names
// opaque user ids of a marketplace; it is recorded on the entities log
// (pending), and a job (Eraser) applies the pending requests in batches to
// every store that holds the ids: ClickHouse's rows, the segments' members
// in Redis and the scored-attribution files in S3 (docs/operations/privacy.md).
package privacy

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/storage/statelog"
)

// TypeDeletion is the entity type of deletion requests on the entities log.
const TypeDeletion = "privacy_deletion"

// Limits of a request.
const (
	// MaxIDsPerRequest is the most opaque user ids one request may name.
	MaxIDsPerRequest = 1000
	// MaxOpaqueUserIDLen is the longest opaque user id, in characters:
	// the limit of /v2/events and /v2/auctions.
	MaxOpaqueUserIDLen = 90
)

// Status of a deletion request.
type Status string

// Statuses: pending (recorded; waiting for the next run) → running (a run
// is applying it; back to pending when the run fails and will be retried)
// → completed, or failed after MaxAttempts failed runs.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// Terminal says whether the status no longer changes.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// Deletion is a deletion request's record on the entities log, keyed by
// marketplace and deletion id. Every change of status is a new version. The
// ids are kept only until the request is completed or failed: the record of
// a finished request holds their number and what was removed, not the ids.
type Deletion struct {
	ID            string     `json:"deletionId"`
	Status        Status     `json:"status"`
	RequestedAt   time.Time  `json:"requestedAt"`
	OpaqueUserIDs []string   `json:"opaqueUserIds,omitempty"`
	IDCount       int        `json:"idCount"`
	Attempts      int        `json:"attempts,omitempty"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	FinishedAt    *time.Time `json:"finishedAt,omitempty"`
	// Removed is counted when a run first takes the request (ClickHouse),
	// and as each store is done (Redis, S3).
	Removed *Removed `json:"removed,omitempty"`
	// Days are the marketplace-local days (YYYY-MM-DD) whose
	// scored-attribution files hold the ids, found with the ClickHouse
	// counts (the rows lose the ids after); kept until the files are
	// rewritten.
	Days    []string `json:"days,omitempty"`
	Failure string   `json:"failure,omitempty"`
}

// Removed is what a deletion removed, per store.
type Removed struct {
	// ClickHouse: rows per table, deleted or with the id blanked
	// (docs/operations/privacy.md, What is removed).
	ClickHouse map[string]int64 `json:"clickhouse"`
	// Redis: memberships of segments removed.
	Redis RedisRemoved `json:"redis"`
	// S3: scored-attribution files rewritten, and their rows whose id was
	// blanked.
	S3 S3Removed `json:"s3"`
}

// RedisRemoved is what a deletion removed from Redis.
type RedisRemoved struct {
	SegmentMemberships int64 `json:"segmentMemberships"`
}

// S3Removed is what a deletion removed from the object store.
type S3Removed struct {
	ScoredAttributionFiles int64 `json:"scoredAttributionFiles"`
	ScoredAttributionRows  int64 `json:"scoredAttributionRows"`
}

// Service records deletion requests and answers their status.
type Service struct {
	items *statelog.Collection[Deletion]
	now   func() time.Time
}

// New registers the deletion records on the entities log (call it before
// the log runs).
func New(entities *statelog.Log) *Service {
	return &Service{items: statelog.NewCollection[Deletion](entities, TypeDeletion), now: time.Now}
}

// ErrNotFound: no such deletion request in this marketplace.
var ErrNotFound = validation.NotFoundf("no such deletion request in this marketplace")

// Input is the body of a request. Nil means absent.
type Input struct {
	OpaqueUserIDs *[]string `json:"opaqueUserIds"`
}

// Validate checks a request's ids and returns them without duplicates, in
// their first order: 1 to MaxIDsPerRequest ids, each a non-empty string of
// at most MaxOpaqueUserIDLen characters, as /v2/events takes them.
func Validate(in Input) ([]string, error) {
	var errs validation.Errors
	if in.OpaqueUserIDs == nil {
		errs.Add(validation.Missing, "Field required", "body", "opaqueUserIds")
		return nil, errs
	}
	ids := *in.OpaqueUserIDs
	switch {
	case len(ids) == 0:
		errs.Add(validation.TooShort, "List should have at least 1 item", "body", "opaqueUserIds")
	case len(ids) > MaxIDsPerRequest:
		errs.Add(validation.TooLong, "List should have at most "+strconv.Itoa(MaxIDsPerRequest)+" items, not "+strconv.Itoa(len(ids))+": send several requests", "body", "opaqueUserIds")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		switch {
		case id == "":
			errs.Add(validation.TooShort, "String should have at least 1 character", "body", "opaqueUserIds", i)
		case !utf8.ValidString(id):
			errs.Add(validation.Invalid, "Input should be a valid UTF-8 string", "body", "opaqueUserIds", i)
		case utf8.RuneCountInString(id) > MaxOpaqueUserIDLen:
			errs.Add(validation.TooLong, "String should have at most "+strconv.Itoa(MaxOpaqueUserIDLen)+" characters", "body", "opaqueUserIds", i)
		case !seen[id]:
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// Create validates a request and records it as pending; it returns the
// record once it is on the log. A request with an idempotency key
// (idempotency.NewID) creates the deletion whose id is derived from the
// key: a retry gets the deletion its first attempt created.
func (s *Service) Create(ctx context.Context, mp string, in Input) (Deletion, error) {
	ids, err := Validate(in)
	if err != nil {
		return Deletion{}, err
	}
	id, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Deletion{}, err
	}
	if keyed {
		if d, _, ok := s.items.Get(mp, id); ok {
			return d, nil
		}
	}
	d := Deletion{ID: id, Status: StatusPending, RequestedAt: s.now().UTC().Truncate(time.Millisecond), OpaqueUserIDs: ids, IDCount: len(ids)}
	if _, err := s.items.Put(ctx, mp, id, 0, d); err != nil {
		return Deletion{}, err
	}
	return d, nil
}

// normalID is id in the form deletion ids are kept in (lower case), or ""
// when it is not a UUID.
func normalID(id string) string {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return ""
	}
	return u.String()
}

// Get returns a deletion request of the marketplace.
func (s *Service) Get(mp, id string) (Deletion, error) {
	d, _, ok := s.items.Get(mp, normalID(id))
	if !ok {
		return Deletion{}, ErrNotFound
	}
	return d, nil
}

// List returns up to limit deletion requests of a marketplace, newest
// first, before the id `before` (ids are time-ordered), and whether more
// follow.
func (s *Service) List(mp, before string, limit int) ([]Deletion, bool) {
	_, vals, more := s.items.PageDesc(mp, before, limit, nil)
	return vals, more
}

// View is a deletion request as the API shows it: without the ids.
type View struct {
	DeletionID        string          `json:"deletionId"`
	Status            Status          `json:"status"`
	RequestedAt       timestamp.Time  `json:"requestedAt"`
	OpaqueUserIDCount int             `json:"opaqueUserIdCount"`
	StartedAt         *timestamp.Time `json:"startedAt"`
	FinishedAt        *timestamp.Time `json:"finishedAt"`
	Removed           *Removed        `json:"removed"`
	Failure           *string         `json:"failure"`
}

// ViewOf is d as the API shows it.
func ViewOf(d Deletion) View {
	v := View{DeletionID: d.ID, Status: d.Status, RequestedAt: timestamp.Of(d.RequestedAt), OpaqueUserIDCount: d.IDCount,
		StartedAt: timestamp.OptOf(d.StartedAt), FinishedAt: timestamp.OptOf(d.FinishedAt)}
	if d.Status == StatusCompleted {
		v.Removed = d.Removed
	}
	if d.Failure != "" {
		f := d.Failure
		v.Failure = &f
	}
	return v
}

// firstLine is the first line of an error's text, for a record.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

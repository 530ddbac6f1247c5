package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
)

// Vendor balances (docs/reference/balances.md). Every movement of a vendor's funds
// that is not a charge is an entity of its own on the entities log, never
// changed once written ("balance_movement", keyed by a UUIDv7: the ledger):
// a top-up, or a change of its credit limit. A vendor's credit limit is
// also one entity ("vendor_credit_limit", keyed by the vendor), whose
// version orders its changes. Redis holds the funds the charges draw on
// (spend.FundsKey); each movement is applied to it exactly once (a top-up
// by its id, a credit limit by its version), by the process that wrote it
// and, after a crash between the log and Redis, by the applier (Apply).
const (
	typeMovement    = "balance_movement"
	typeCreditLimit = "vendor_credit_limit"

	// Kinds of movement.
	MovementTopUp       = "top_up"
	MovementCreditLimit = "credit_limit"

	maxDescription = 255
)

// Movement is one entry of a vendor's ledger, besides its charges.
type Movement struct {
	ID          string    `json:"id"`
	VendorID    string    `json:"vendorId"`
	Kind        string    `json:"kind"`         // MovementTopUp or MovementCreditLimit
	Micros      int64     `json:"amountMicros"` // the top-up, or the new credit limit
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	// LimitVersion is the version of the vendor's credit limit this change
	// wrote (credit limits only).
	LimitVersion int64 `json:"limitVersion,omitempty"`
}

// CreditLimit is a vendor's credit limit.
type CreditLimit struct {
	VendorID  string    `json:"vendorId"`
	Micros    int64     `json:"micros"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Balance is a vendor's funds as Redis has them now.
type Balance struct {
	VendorID string
	spend.Funds
}

// Balances is the vendor balances view and its operations.
type Balances struct {
	log       *statelog.Log
	movements *statelog.Collection[Movement]
	limits    *statelog.Collection[CreditLimit]
	cat       entityref.Catalog
	rdb       redis.UniversalClient
	now       func() time.Time

	mu      sync.Mutex
	queue   []pending // movements to apply to Redis (applier only)
	wake    chan struct{}
	applier bool
}

type pending struct {
	mp string
	m  Movement
}

// NewBalances registers the balance collections on log (call before the log
// runs).
func NewBalances(log *statelog.Log, cat entityref.Catalog, rdb redis.UniversalClient) *Balances {
	b := &Balances{
		log:       log,
		movements: statelog.NewCollection[Movement](log, typeMovement),
		limits:    statelog.NewCollection[CreditLimit](log, typeCreditLimit),
		cat:       cat, rdb: rdb,
		now:  func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		wake: make(chan struct{}, 1),
	}
	b.movements.OnChange = func(mp, _ string, old, nw *Movement) {
		if old != nil || nw == nil {
			return // movements are never changed
		}
		b.mu.Lock()
		if b.applier {
			b.queue = append(b.queue, pending{mp: mp, m: *nw})
		}
		b.mu.Unlock()
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return b
}

// EnableApplier makes the view queue every movement it applies for Apply
// (call before the log runs: the load replays them all).
func (b *Balances) EnableApplier() {
	b.mu.Lock()
	b.applier = true
	b.mu.Unlock()
}

// Apply applies the queued movements to Redis until ctx ends, retrying
// failures with backoff; applying one twice changes nothing.
func (b *Balances) Apply(ctx context.Context, log *slog.Logger) error {
	bo := retry.New(100*time.Millisecond, 5*time.Second)
	for {
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		b.mu.Unlock()
		for i := 0; i < len(q); {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := b.apply(actx, q[i].mp, q[i].m)
			cancel()
			if err == nil {
				bo.Reset()
				i++
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("balances: a ledger movement not applied to Redis yet; retrying", "marketplace", q[i].mp, "movement", q[i].m.ID, "err", err)
			if _, err := bo.Wait(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.wake:
		}
	}
}

func (b *Balances) apply(ctx context.Context, mp string, m Movement) error {
	switch m.Kind {
	case MovementTopUp:
		_, err := spend.ApplyTopUp(ctx, b.rdb, mp, m.VendorID, m.ID, m.Micros)
		if errors.Is(err, spend.ErrFundsLimit) {
			return nil // refused when it was written: never applied
		}
		return err
	case MovementCreditLimit:
		_, err := spend.SetCreditLimit(ctx, b.rdb, mp, m.VendorID, m.Micros, m.LimitVersion)
		return err
	}
	return nil
}

// unavailable is the error of a Redis failure: 503, retry (a top-up with
// the same Idempotency-Key credits once).
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(errkind.New(errkind.Unavailable, "the vendor's funds cannot be read or written right now; retry (a top-up with the same Idempotency-Key)").
		WithRetryAfter(time.Second), err)
}

func (b *Balances) vendor(mp, id string) (string, error) {
	v, ok := b.cat.Vendor(mp, id)
	if !ok {
		return "", validation.NotFoundf("vendor %s", id)
	}
	return v.ID, nil
}

// Get reads a vendor's funds.
func (b *Balances) Get(ctx context.Context, mp, vendorID string) (Balance, error) {
	id, err := b.vendor(mp, vendorID)
	if err != nil {
		return Balance{}, err
	}
	f, err := spend.ReadFunds(ctx, b.rdb, mp, id)
	if err != nil {
		return Balance{}, unavailable(err)
	}
	return Balance{VendorID: id, Funds: f}, nil
}

// GetMany reads the funds of several vendors (catalog ids of vendors that
// exist) in one round trip, in their order.
func (b *Balances) GetMany(ctx context.Context, mp string, vendorIDs []string) ([]Balance, error) {
	fs, err := spend.ReadFundsOf(ctx, b.rdb, mp, vendorIDs)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Balance, len(fs))
	for i, f := range fs {
		out[i] = Balance{VendorID: vendorIDs[i], Funds: f}
	}
	return out, nil
}

// TopUp credits micros to a vendor: a ledger movement, then its funds. The
// retry of a request with an idempotency key gets the movement its first
// attempt wrote, and credits nothing twice.
func (b *Balances) TopUp(ctx context.Context, mp, vendorID string, micros int64, description string) (Movement, error) {
	id, err := b.vendor(mp, vendorID)
	if err != nil {
		return Movement{}, err
	}
	var errs validation.Errors
	if micros <= 0 {
		errs.Add("value_error.number.not_gt", "must be greater than 0", "body", "balance")
	}
	if len(description) > maxDescription {
		errs.Add("value_error.any_str.max_length", fmt.Sprintf("at most %d characters", maxDescription), "body", "description")
	}
	if f, err := spend.ReadFunds(ctx, b.rdb, mp, id); err == nil && f.Credited+micros > spend.MaxFunds {
		errs.Add("value_error.number.not_le", fmt.Sprintf("would take the vendor's credited funds over %d micro-units", spend.MaxFunds), "body", "balance")
	}
	if err := errs.Err(); err != nil {
		return Movement{}, err
	}
	mid, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Movement{}, err
	}
	m, _, ok := b.movements.Get(mp, mid)
	if !ok {
		m = Movement{ID: mid, VendorID: id, Kind: MovementTopUp, Micros: micros, Description: description, CreatedAt: b.now()}
		_, err = b.movements.Put(ctx, mp, mid, 0, m)
		if keyed && errors.Is(err, statelog.ErrConflict) {
			m, _, err = idempotency.Existing(err, func() (Movement, int64, bool) { return b.movements.Get(mp, mid) })
		}
		if err != nil {
			return Movement{}, err
		}
	}
	return m, unavailable(b.apply(ctx, mp, m))
}

// SetCreditLimit sets a vendor's credit limit (micro-units, 0: none): its
// credit-limit entity, with a ledger movement, then its funds.
func (b *Balances) SetCreditLimit(ctx context.Context, mp, vendorID string, micros int64) (Movement, error) {
	id, err := b.vendor(mp, vendorID)
	if err != nil {
		return Movement{}, err
	}
	if micros < 0 || micros > spend.MaxFunds {
		var errs validation.Errors
		errs.Add("value_error.number.not_le", fmt.Sprintf("must be 0 to %d micro-units", spend.MaxFunds), "body", "creditLimit")
		return Movement{}, errs.Err()
	}
	mid, keyed, err := idempotency.NewID(ctx, 0)
	if err != nil {
		return Movement{}, err
	}
	if keyed {
		if m, _, ok := b.movements.Get(mp, mid); ok {
			return m, unavailable(b.apply(ctx, mp, m))
		}
	}
	_, cur, _ := b.limits.Get(mp, id)
	now := b.now()
	m := Movement{ID: mid, VendorID: id, Kind: MovementCreditLimit, Micros: micros, CreatedAt: now, LimitVersion: cur + 1}
	vs, err := b.log.AppendBatch(ctx, []statelog.Change{
		b.limits.Change(mp, statelog.Write[CreditLimit]{ID: id, Expected: cur, Value: CreditLimit{VendorID: id, Micros: micros, UpdatedAt: now}}),
		b.movements.Change(mp, statelog.Write[Movement]{ID: mid, Value: m}),
	})
	if err != nil {
		return Movement{}, err
	}
	if vs[0] != m.LimitVersion {
		return Movement{}, fmt.Errorf("billing: credit limit of vendor %s written as version %d, not %d", id, vs[0], m.LimitVersion)
	}
	return m, unavailable(b.apply(ctx, mp, m))
}

// CreditLimitOf is a vendor's credit limit (0: none).
func (b *Balances) CreditLimitOf(mp, vendorID string) int64 {
	c, _, _ := b.limits.Get(mp, vendorID)
	return c.Micros
}

// Ledger returns a page of a vendor's movements, newest first.
func (b *Balances) Ledger(mp, vendorID, before string, limit int) ([]Movement, bool, error) {
	id, err := b.vendor(mp, vendorID)
	if err != nil {
		return nil, false, err
	}
	_, ms, more := b.movements.PageDesc(mp, before, limit, func(_ string, m Movement) bool { return m.VendorID == id })
	return ms, more, nil
}

// Vendors lists the vendors of a marketplace with a ledger movement, in id
// order (the operators' console page).
func (b *Balances) Vendors(mp string) []string {
	seen := map[string]bool{}
	var out []string
	b.movements.Each(mp, func(_ string, m Movement) bool {
		if !seen[m.VendorID] {
			seen[m.VendorID] = true
			out = append(out, m.VendorID)
		}
		return true
	})
	return out
}

// EachMovement calls fn with every movement of marketplace mp, in id order,
// until it returns false (the balance_ledger export).
func (b *Balances) EachMovement(mp string, fn func(Movement) bool) {
	b.movements.Each(mp, func(_ string, m Movement) bool { return fn(m) })
}

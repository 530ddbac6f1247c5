package billing_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/fakes"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestBalances: a top-up with an idempotency key credits once whatever the
// retries; credit limits apply in order; the ledger lists a vendor's
// movements, newest first; a process that starts later (the applier)
// applies every movement to Redis again, moving nothing twice.
func TestBalances(t *testing.T) {
	_, brokers := testenv.Kafka(t)
	rdb := testenv.Get(t).Redis(t)
	mp := uuid.NewString()
	cat := fakes.NewCatalog(mp+"/v-1", mp+"/v-2")
	var b *billing.Balances
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "bal."}, func(l *statelog.Log) { b = billing.NewBalances(l, cat, rdb) })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	keyed := idempotency.WithRequest(ctx, "test", "key-1", "fp", time.Now())
	first, err := b.TopUp(keyed, mp, "v-1", 2_500_000, "first funds")
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.TopUp(keyed, mp, "v-1", 2_500_000, "first funds")
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry: %+v %v (first %s)", again, err, first.ID)
	}
	if _, err := b.TopUp(ctx, mp, "v-1", 1, ""); err != nil {
		t.Fatal(err)
	}
	for _, micros := range []int64{300_000, 100_000} {
		if _, err := b.SetCreditLimit(ctx, mp, "v-1", micros); err != nil {
			t.Fatal(err)
		}
	}
	bal, err := b.Get(ctx, mp, "v-1")
	if err != nil {
		t.Fatal(err)
	}
	if bal.Credited != 2_500_001 || bal.CreditLimit != 100_000 || bal.Available() != 2_600_001 {
		t.Fatalf("balance %+v", bal)
	}
	// Refusals.
	if _, err := b.TopUp(ctx, mp, "v-1", 0, ""); !isField(err, "balance") {
		t.Errorf("a top-up of 0: %v", err)
	}
	if _, err := b.TopUp(ctx, mp, "nobody", 1, ""); !errors.Is(err, validation.ErrNotFound) {
		t.Errorf("an unknown vendor: %v", err)
	}
	if _, err := b.SetCreditLimit(ctx, mp, "v-1", -1); !isField(err, "creditLimit") {
		t.Errorf("a negative credit limit: %v", err)
	}
	// The ledger: newest first, pages.
	page, more, err := b.Ledger(mp, "v-1", "", 2)
	if err != nil || !more || len(page) != 2 || page[0].Kind != billing.MovementCreditLimit || page[0].Micros != 100_000 {
		t.Fatalf("ledger page 1: %+v %v %v", page, more, err)
	}
	rest, more, err := b.Ledger(mp, "v-1", page[1].ID, 10)
	if err != nil || more || len(rest) != 2 || rest[1].ID != first.ID || rest[1].Description != "first funds" {
		t.Fatalf("ledger page 2: %+v %v %v", rest, more, err)
	}
	if other, _, _ := b.Ledger(mp, "v-2", "", 10); len(other) != 0 {
		t.Fatalf("v-2's ledger: %+v", other)
	}

	// Redis lost the vendor's funds (a replica that took over late, say):
	// a later process's applier puts back what the ledger holds, once.
	if err := rdb.Del(ctx, spend.FundsKey(mp, "v-1")).Err(); err != nil {
		t.Fatal(err)
	}
	var later *billing.Balances
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "bal."}, func(l *statelog.Log) {
		later = billing.NewBalances(l, cat, rdb)
		later.EnableApplier()
	})
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = later.Apply(actx, testenv.Logger(t)) })
	defer func() { stop(); wg.Wait() }()
	testenv.Eventually(t, 10*time.Second, func() error {
		f, err := spend.ReadFunds(ctx, rdb, mp, "v-1")
		if err != nil {
			return err
		}
		if f.Credited != 2_500_001 || f.CreditLimit != 100_000 {
			return testenv.Errorf("funds %+v", f)
		}
		return nil
	})
}

func isField(err error, field string) bool {
	v, ok := validation.As(err)
	return ok && len(v) == 1 && len(v[0].Loc) == 2 && v[0].Loc[1] == field
}

package bounded

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCall(t *testing.T) {
	// A call that answers in time.
	v, err := Call(context.Background(), func(context.Context) (int, error) { return 7, nil }, nil)
	if v != 7 || err != nil {
		t.Fatalf("%d %v", v, err)
	}
	// A call that ignores its context: the caller gets the context's cause
	// when it ends, and late gets the result afterwards.
	cause := errors.New("deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	release := make(chan struct{})
	lateGot := make(chan int, 1)
	start := time.Now()
	_, err = Call(ctx, func(context.Context) (int, error) { <-release; return 9, nil }, func(v int) { lateGot <- v })
	if !errors.Is(err, cause) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	close(release)
	select {
	case v := <-lateGot:
		if v != 9 {
			t.Fatalf("late got %d", v)
		}
	case <-time.After(time.Second):
		t.Fatal("late not called")
	}
	// A context that ended before: the call does not run.
	ran := false
	if _, err := Call(ctx, func(context.Context) (int, error) { ran = true; return 0, nil }, nil); !errors.Is(err, cause) || ran {
		t.Fatalf("ended context: err %v, ran %v", err, ran)
	}
}

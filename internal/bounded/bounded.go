// Package bounded runs a call that may outlive its context: the caller
// gets an answer when the context ends, whatever the call does.
package bounded

import "context"

// Call runs fn and returns its result, or context.Cause(ctx) as soon as ctx
// ends if fn has not returned by then (a Redis client, for one, may wait for
// its own socket timeouts rather than for the context). fn goes on in the
// background; late, when not nil, is then given its result if it succeeds,
// to undo what it did.
func Call[T any](ctx context.Context, fn func(context.Context) (T, error), late func(T)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, context.Cause(ctx)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-ch:
			return r.v, r.err
		default:
		}
		if late != nil {
			go func() {
				if r := <-ch; r.err == nil {
					late(r.v)
				}
			}()
		}
		var zero T
		return zero, context.Cause(ctx)
	}
}

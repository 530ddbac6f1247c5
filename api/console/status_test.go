package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/endcap/endcap/internal/errkind"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/storage/statelog"
)

// TestStatusOf: the console answers an error with the status of its
// outermost kind, as the API does; a bare kind wrapped with a message
// counts; anything else is a 500 without its text.
func TestStatusOf(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"a domain's invalid", errkind.New(errkind.Invalid, "no name"), http.StatusUnprocessableEntity, "No name"},
		{"a bare kind with a message", fmt.Errorf("%w: the day is not a date", errkind.Invalid), http.StatusUnprocessableEntity, "The day is not a date"},
		{"a conflict", statelog.ErrConflict, http.StatusConflict, "The resource was changed by another request; read it again and retry"},
		{"an export not confirmed, over a conflict", fmt.Errorf("%w: still being written: %w", exports.ErrUnconfirmed, statelog.ErrConflict),
			http.StatusServiceUnavailable, "The export could not be accepted right now; nothing was queued; retry later"},
		{"a deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "The service did not answer in time; try again."},
		{"an internal failure", errors.New("disk on fire"), http.StatusInternalServerError, "Something went wrong on our side; try again."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, msg := statusOf(tc.err)
			if st != tc.status || msg != tc.msg {
				t.Errorf("statusOf(%v) = %d %q, want %d %q", tc.err, st, msg, tc.status, tc.msg)
			}
		})
	}
}

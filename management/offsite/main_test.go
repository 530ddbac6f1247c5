package offsite_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves goroutines running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

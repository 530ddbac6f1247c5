package claimstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The store starts a trimming goroutine per open store: Close must stop it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

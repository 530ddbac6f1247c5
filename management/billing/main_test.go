package billing_test

import (
	"testing"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestMain stops the test servers and fails the run when a test leaves
// goroutines running.
func TestMain(m *testing.M) { testenv.Main(m) }

package main

import (
	"testing"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestMain stops the shared test servers and fails the run when a test
// leaves goroutines running.
func TestMain(m *testing.M) { testenv.Main(m) }

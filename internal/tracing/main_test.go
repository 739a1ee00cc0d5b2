package tracing_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a provider shut down leaves no goroutine behind:
// neither its batch processor nor its exporter's connections.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

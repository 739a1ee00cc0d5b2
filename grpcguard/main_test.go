package grpcguard_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// stream's goroutine must end with its stream.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

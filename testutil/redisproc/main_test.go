package redisproc

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (package
// testutil, which every other package's TestMain goes through, imports
// this one, so this one checks for itself, with the same exception).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(SpawnerFunc))
}

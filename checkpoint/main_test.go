package checkpoint

import (
	"testing"

	"github.com/cowstate/cowstate/internal/leakcheck"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { leakcheck.Main(m) }

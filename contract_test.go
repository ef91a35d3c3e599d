package cowstate_test

import (
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/rapidtest"
)

// TestBackend_Conformance runs the conformance suite of package rapidtest
// against Backend: every operation of the Contract, side by side with the
// reference model, every live snapshot compared after every step.
func TestBackend_Conformance(t *testing.T) {
	rapidtest.Run(t, func(cfg rapidtest.Config) rapidtest.Backend {
		b, err := cowstate.New(cfg)
		if err != nil {
			panic(err)
		}
		return b
	}, rapidtest.Options{})
}

package rapidtest_test

import (
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/rapidtest"
)

func newModel(cfg rapidtest.Config) rapidtest.Backend {
	m, err := rapidtest.NewModel(cfg)
	if err != nil {
		panic(err)
	}
	return m
}

func newCowstate(cfg rapidtest.Config) rapidtest.Backend {
	b, err := cowstate.New(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// TestModel runs the suite against the model itself: the suite and the
// model agree with themselves.
func TestModel(t *testing.T) { rapidtest.Run(t, newModel, rapidtest.Options{}) }

// TestCowstate runs the suite against cowstate's Backend.
func TestCowstate(t *testing.T) { rapidtest.Run(t, newCowstate, rapidtest.Options{}) }

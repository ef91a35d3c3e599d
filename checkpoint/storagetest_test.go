package checkpoint_test

import (
	"path/filepath"
	"testing"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/storagetest"
)

// TestStorage_Conformance runs package storagetest's checks on the
// storages of this package.
func TestStorage_Conformance(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		storagetest.Run(t, func(t testing.TB) checkpoint.Storage {
			d, err := checkpoint.Dir(filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			return d
		})
	})
	t.Run("mem", func(t *testing.T) {
		storagetest.Run(t, func(testing.TB) checkpoint.Storage { return checkpoint.Memory() })
	})
}

package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
)

// Output exactly once: a running count per word written to a FileSink,
// which commits what the job wrote before each checkpoint once that
// checkpoint is durable. The first process dies after writing output that
// no checkpoint covers; the second resumes from the checkpoint, and the
// committed output holds every line once.
func Example_fileSink() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "cowstate-example")
	defer os.RemoveAll(dir)
	store, _ := checkpoint.Dir(filepath.Join(dir, "checkpoints"))
	words := []string{"to", "be", "or", "not", "to", "be"}

	run := func(crashAfter int) error { // one process
		b, _ := cowstate.New(cowstate.Config{})
		counts, _ := cowstate.Value[string, int64](b, "counts")
		sink, _ := checkpoint.NewFileSink(filepath.Join(dir, "out"), "")
		loop, start, err := checkpoint.Resume[int](ctx, b, store, checkpoint.LoopOptions{Records: 2, Sink: sink})
		if err != nil {
			return err
		}
		for i := start.Meta; i < len(words); i++ {
			counts.Update(words[i], func(n int64) int64 { return n + 1 })
			n, _ := counts.Get(words[i])
			fmt.Fprintln(sink, words[i], n)
			if i == crashAfter {
				return nil // dies: what it wrote since its last checkpoint is not committed
			}
			if err := loop.Processed(ctx, 1, i+1); err != nil {
				return err
			}
		}
		_, err = loop.Sync(ctx, len(words)) // commits the rest
		return err
	}
	run(4)
	if err := run(-1); err != nil {
		fmt.Println(err)
	}
	parts, _ := checkpoint.FileSinkParts(filepath.Join(dir, "out"), "")
	for _, p := range parts {
		b, _ := os.ReadFile(filepath.Join(dir, "out", p))
		fmt.Print(string(b))
	}
	// Output:
	// to 1
	// be 1
	// or 1
	// not 1
	// to 2
	// be 2
}

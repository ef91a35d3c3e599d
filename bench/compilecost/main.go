// Command compilecost is the smallest program a cowstate user writes: a
// backend, one value state, a put and a get. It exists to measure what
// importing cowstate costs a user's edit-compile cycle: built on its own
// (cd bench && go build ./compilecost, no workspace) with a build cache
// that holds only the standard library; its figures and where the time
// goes are in docs/decisions/0024-compile-cost-ttl-constructors.md.
package main

import (
	"fmt"
	"os"

	"github.com/cowstate/cowstate"
)

func main() {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	count, err := cowstate.Value[string, int64](b, "count")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := count.Put("user-1", 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	n, err := count.Get("user-1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(n)
}

// Command library is a program of BenchmarkBuildCost (see package buildcost).
package main

import (
	"context"
	"log"
	"os"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
)

func main() {
	ctx := context.Background()
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		log.Fatal(err)
	}
	st, err := checkpoint.Dir(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	if _, err := checkpoint.Open(ctx, b, st, checkpoint.Options{}); err != nil {
		log.Fatal(err)
	}
}

// Command storeurl is a program of BenchmarkBuildCost (see package buildcost).
package main

import (
	"context"
	"log"
	"os"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	_ "gocloud.dev/blob/s3blob"
)

func main() {
	ctx := context.Background()
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		log.Fatal(err)
	}
	st, err := storeurl.Open(ctx, os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	if _, err := checkpoint.Open(ctx, b, st, checkpoint.Options{}); err != nil {
		log.Fatal(err)
	}
}

package cowstate_test

import (
	"fmt"

	"github.com/cowstate/cowstate"
)

// A batch of events applied at once: a running total per account, each
// event's amount folded in by its index in the batch. The result is that
// of one Update an event, in order; at millions of keys the batch runs
// faster, its cache misses overlapped.
func ExampleValueState_UpdateEach() {
	type payment struct {
		account int64
		amount  int64
	}
	b, _ := cowstate.New(cowstate.Config{})
	totals, _ := cowstate.Value[int64, int64](b, "totals")

	batch := []payment{{7, 100}, {9, 5}, {7, -30}} // as a source's poll returns them
	accounts := make([]int64, len(batch))
	for i, p := range batch {
		accounts[i] = p.account
	}
	if err := totals.UpdateEach(accounts, func(i int, total int64) int64 {
		return total + batch[i].amount
	}); err != nil {
		panic(err)
	}

	seven, _ := totals.Get(7)
	nine, _ := totals.Get(9)
	fmt.Println("account 7:", seven, "account 9:", nine)
	// Output:
	// account 7: 70 account 9: 5
}

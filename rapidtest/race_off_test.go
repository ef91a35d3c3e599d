//go:build !race

package rapidtest

const raceEnabled = false

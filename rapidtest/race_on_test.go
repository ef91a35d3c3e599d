//go:build race

package rapidtest

const raceEnabled = true

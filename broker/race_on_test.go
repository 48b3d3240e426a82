//go:build race

package broker

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = true

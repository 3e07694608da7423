//go:build !race

package arena

// raceEnabled is true in a -race build.
const raceEnabled = false

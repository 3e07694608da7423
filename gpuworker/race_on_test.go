//go:build race

package gpuworker_test

// raceEnabled is true in a -race build, where sync.Pool drops a quarter of
// what it is given, on purpose.
const raceEnabled = true

//go:build race

package arena

// raceEnabled is true in a -race build, where the heaviest listings (every
// tensor of DeepSeek-V3, tens of thousands) take seconds each.
const raceEnabled = true

//go:build race

package transport

// raceEnabled: the race detector is on (sync.Pool then drops items at random,
// so allocation counts mean nothing).
const raceEnabled = true

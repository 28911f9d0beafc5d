//go:build race

package host

// raceEnabled: the race detector makes each in-process gRPC call about ten
// times dearer, which matters for a suite of ~40,000 calls per policy.
const raceEnabled = true

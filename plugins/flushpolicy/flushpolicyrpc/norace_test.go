//go:build !race

package flushpolicyrpc_test

const raceEnabled = false

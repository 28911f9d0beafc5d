package codectest

import pl "github.com/weir-broker/weir/plugins/codec/payload"

// The payload generators live in package payload (which binaries may import
// without linking package testing); these are kept for tests.

// RandomPayload is payload.RandomPayload.
func RandomPayload(seed int64, n int) []byte { return pl.RandomPayload(seed, n) }

// JSONLogLines is payload.JSONLogLines.
func JSONLogLines(seed int64, count int) [][]byte { return pl.JSONLogLines(seed, count) }

// JSONLogPayload is payload.JSONLogPayload.
func JSONLogPayload(seed int64, n int) []byte { return pl.JSONLogPayload(seed, n) }

// RecordsSection is payload.RecordsSection.
func RecordsSection(seed int64, count int) []byte { return pl.RecordsSection(seed, count) }

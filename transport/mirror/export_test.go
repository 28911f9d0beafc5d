package mirror

// SentBatches is, when forwarding, the most batches of one partition in
// flight to the target right now (sent, not yet answered).
func SentBatches(m *Mirror) int {
	if m.fw == nil {
		return 0
	}
	m.fw.mu.Lock()
	defer m.fw.mu.Unlock()
	n := 0
	for _, fp := range m.fw.parts {
		n = max(n, fp.sent)
	}
	return n
}

// SetForwardLanes sets the connections to each target leader (fwdLanes)
// and source leader (fwdFetchLanes) forwarding uses, for benchmarks; n <=
// 0 keeps it.
func SetForwardLanes(n, fetch int) {
	if n > 0 {
		fwdLanes = n
	}
	if fetch > 0 {
		fwdFetchLanes = fetch
	}
}

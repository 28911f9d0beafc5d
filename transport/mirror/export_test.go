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

// ScribbleBuffers makes the forwarder's connections read their answers
// into buffers overwritten when recycled (bufPool.scribble), so that a
// batch still written, or a slice still read, after its buffer's last
// release shows (the target refuses a scribbled batch's CRC). Call it
// before Run.
func ScribbleBuffers(m *Mirror) {
	if m.fw != nil && m.fw.srcWire != nil {
		m.fw.srcWire.bufs = &bufPool{scribble: true}
		m.fw.tgtWire.bufs = &bufPool{scribble: true}
	}
}

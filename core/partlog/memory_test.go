package partlog_test

import "testing"

// segmentOverheadBytes is the heap an open segment may hold besides its index
// entries: the Segment and its two index headers, the open log file's handle
// and its path. No buffer of its own: windows for scanning headers and
// buffers for loading indexes are shared or dropped once Open returns.
const segmentOverheadBytes = 1024

// TestMemoryPerSegment checks the design's memory promise: an open partition
// holds its index entries and a few buffers, so the live heap per segment is
// at most the index bytes it loaded plus segmentOverheadBytes. A per-segment
// buffer, an index loaded with slack, or a leaked read buffer breaks it.
func TestMemoryPerSegment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and opens a 1,000-segment log")
	}
	m := measureOpen(t, manySegmentsOnDisk(t))
	t.Logf("open log of %d segments: %.0f B/segment of heap, %.0f B/segment of index entries, estimate (SegmentInfo.MemBytes) %.0f B/segment",
		m.segments, m.heap, m.index, m.estimate)
	if limit := m.index + segmentOverheadBytes; m.heap > limit {
		t.Errorf("an open log holds %.0f B per segment, more than its %.0f B of index entries + %d", m.heap, m.index, segmentOverheadBytes)
	}
}

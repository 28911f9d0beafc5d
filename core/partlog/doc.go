// Package partlog is one partition's log: an ordered list of segments (package
// segment), the last of them active, plus the rules that tie them together:
// offset assignment, rolling, flushing, recovery, retention and truncation.
//
// Directory layout of a partition:
//
//	<data>/<topic>-<partition>/
//	    00000000000000000000.log  .index  .timeindex   sealed segment
//	    00000000000000368769.log  .index  .timeindex   active segment (last)
//	    recovery-point                                  "v1 <offset> <crc>": segments ending at or below are sealed and fsynced
//	    clean-shutdown                                  present only between a clean Close and the next Open
//
// # Appending
//
// Append takes the bytes of one or more Kafka v2 batches as a producer sent
// them, validates each (length, magic, CRC-32C, record count), rewrites only
// the base offset and leader epoch (not covered by the CRC), and writes them
// to the active segment with one write: the page cache, not the disk. A batch
// that would take the segment past SegmentBytes, or a segment older than
// SegmentAge, rolls first: a new segment is created (and the directory fsynced),
// and the old one is sealed (fsynced, final time-index entry written) by the
// appender that caused the roll after it leaves the append lock, so other
// producers are not held up. The recovery point then moves past it.
//
// # Flushing and durability
//
// After every append the flush policy (package plugins/flushpolicy) is told what
// is unflushed and decides: fsync now, by a deadline, or leave it to the OS.
// Flush(upTo) is the durable-ack path: it returns once every offset below upTo is
// on disk. Fsyncs are serialised and each covers everything appended before it
// started, so concurrent callers share one fsync (group commit). FlushedOffset
// tells what is durable. A failed write or fsync fails the log (ErrFailed): after
// a failed fsync Linux may drop the dirty pages, so the log refuses to go on
// guessing; reopening recovers from what is really on disk.
//
// # Recovery
//
// Close writes the clean-shutdown marker after sealing and fsyncing everything;
// Open removes it (and fsyncs the directory) before the first append. Without
// the marker, Open trusts only the segments that end at or below the recovery
// point, and re-reads the rest batch by batch (header, offset continuity,
// CRC-32C), cutting at the first bad byte and rebuilding their indexes. A cut
// inside the log deletes the segments after it, so offsets never skip. With the
// marker, every segment is trusted, but indexes that fail their checks are
// rebuilt and the last segment's tail is still re-checked.
//
// # Reading
//
// Read finds the segment by binary search over base offsets (the segment list
// is an immutable slice behind an atomic pointer, so readers never lock), then
// the sparse index, then scans batch headers. It returns a byte range of whole
// batches (at least one, even past maxBytes) that the network layer sends with
// sendfile, holding a reference that keeps the file open even if retention
// deletes the segment meanwhile.
//
// # Retention and truncation
//
// ApplyRetention deletes whole segments from the front by age (newest record
// older than RetentionAge) and by size (while the log stays at least
// RetentionBytes without them), never the active one. Truncate cuts the tail
// for replication: the recovery point moves below the affected segment first,
// later segments are deleted newest first, so a crash at any step leaves a log
// that recovery puts right.
package partlog

// Package segment owns one segment of a partition log: a log file of record
// batches stored exactly as producers sent them, and the sparse offset and time
// indexes beside it (package index).
//
// Files, in the partition directory, named by the segment's base offset (the
// offset of its first record) written as 20 decimal digits:
//
//	00000000000000368769.log        concatenated Kafka RecordBatch v2 batches
//	00000000000000368769.index      offset index: 8-byte entries (relOffset u32, position u32)
//	00000000000000368769.timeindex  time index: 12-byte entries (timestamp i64, relOffset u32)
//
// A segment has one writer (the partition log, which serialises appends) and any
// number of readers. The writer appends a buffer of whole batches with one write,
// then publishes the new size and end offset through atomics; readers load the
// end offset first and the size second and never look past them, so they see only
// whole batches and never block the writer.
//
// Reads return byte ranges of the log file (Slice) rather than bytes, so the
// network layer can send them with sendfile. A Slice holds a reference on the
// segment: a segment deleted by retention closes its files only after the last
// Slice is released.
//
// A segment may live under temporary names, each file's usual name followed
// by a tag (Options.Tag): the log cleaner writes a cleaned segment as
// <base>.log.cleaned (and .index.cleaned, .timeindex.cleaned), then renames
// its files to .swap and into place (see package partlog).
//
// Batches need not be as producers sent them: a cleaned segment holds
// batches whose record offset deltas skip (or start past 0, for a batch whose
// base offset was lowered), whose lastOffsetDelta reaches past their last
// record, and batches of no records. Offsets still continue from batch to
// batch, so every rule below holds for them unchanged.
//
// Opening has two modes. Trust (after a clean shutdown, or for segments the
// recovery point says were flushed) believes the files: the indexes are loaded
// and checked (in order, inside the log, the last entry pointing at its batch),
// and an index that fails is rebuilt from the log. Recover
// (after a crash) re-reads every batch: header sanity, offsets continuing from the
// segment's base, and the CRC-32C, computed in bounded chunks so that a garbage
// length field cannot make recovery allocate it. The log is truncated at the
// first bad byte, and both indexes are rebuilt. OpenLazy opens nothing: its
// owner, knowing the segment intact (a clean shutdown), gives its end and
// size, and the segment opens in Trust mode at the first use that needs its
// files, failing that use (ErrNotAsVouched) if they are not as described.
//
// Files open through a descriptor budget (package filecache, Options.Files):
// each is opened when used and may be closed while idle; a Slice pins its
// file until released.
package segment

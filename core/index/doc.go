// Package index holds the two sparse indexes that sit beside every segment's log file.
//
// The offset index (.index) maps offsets to byte positions in the log file. It is
// sparse: the segment adds an entry for the batch that starts after roughly every
// IndexIntervalBytes appended (4 KiB by default), so a lookup finds the greatest
// entry at or below the wanted offset and the segment scans at most one interval of
// batch headers from there. Each entry is 8 bytes, big-endian:
//
//	 0               4               8
//	+---------------+---------------+
//	| relOffset u32 | position u32  |   relOffset = batch base offset - segment base offset
//	+---------------+---------------+   position  = byte position of that batch in the .log file
//
// The time index (.timeindex) maps timestamps to offsets. An entry (T, r) states
// that every record at an offset below base+r has a timestamp of at most T, so a
// search for the first record with timestamp >= t may start at the entry with the
// greatest T < t. Entries are 12 bytes, big-endian:
//
//	 0                               8               12
//	+-------------------------------+---------------+
//	| timestamp i64 (ms)            | relOffset u32 |
//	+-------------------------------+---------------+
//
// When a segment is sealed (rolled or closed) it appends a final time entry
// (max timestamp, relative end offset), so the last entry of a sealed segment's
// time index gives that segment's largest timestamp without reading the log;
// retention by age uses it.
//
// Both indexes are kept in memory and written to their files lazily: entries
// accumulate in memory and reach the file (fsynced) when the segment is sealed.
// An index file can therefore lag its log after a crash; recovery rebuilds the
// indexes of every segment it re-reads, and Load rejects a file that is not a
// whole number of well-ordered entries (ErrCorrupt), so a damaged index is rebuilt
// from the log rather than trusted.
//
// Concurrency: one writer (Append, Truncate, Write, Sync) and any number of readers
// (Lookup, Len, Last, Entries). Readers never block the writer: the entries are
// published through an atomic pointer, and a growing slice is copied, never
// modified under a reader.
package index

// Package record parses, validates, builds and iterates Kafka RecordBatch v2
// (magic 2), the unit weir stores on disk and sends on the wire unchanged.
//
// # Batch header
//
// A batch is a 61-byte header followed by the records section. All integers
// are big-endian:
//
//	 0               8       12      16 17      21    23      27
//	+---------------+-------+-------+--+-------+-----+-------+
//	| baseOffset    |batch  |leader |m | crc   |attrs|lastOff|   m = magic, int8 (2)
//	| int64         |Length |Epoch  |  | u32   |int16|Delta  |
//	|               |int32  |int32  |  |       |     |int32  |
//	+---------------+-------+-------+--+-------+-----+-------+
//	27              35              43              51    53      57      61
//	+---------------+---------------+---------------+-----+-------+-------+------
//	| baseTimestamp | maxTimestamp  | producerId    |prod |base   |record | records
//	| int64 (ms)    | int64 (ms)    | int64         |Epoch|Seq    |Count  | ...
//	|               |               |               |int16|int32  |int32  |
//	+---------------+---------------+---------------+-----+-------+-------+------
//
// The CRC is CRC-32C (Castagnoli) over every byte from attributes (@21) to the
// end of the batch; the fields before it are not covered.
//
// batchLength counts the bytes after itself, so a batch occupies
// 12 + batchLength bytes and the smallest valid batch (no records, as left by
// compaction) is HeaderSize bytes. The attributes are:
//
//	bit  15 ..  6   5        4              3                2 .. 0
//	     unused     control  transactional  timestamp type   codec
//	                                        (1=LogAppendTime) 0 none, 1 gzip, 2 snappy,
//	                                                          3 lz4, 4 zstd, 5-7 custom
//
// # Record
//
// The records section holds recordCount records back to back; with a codec it
// is one compressed block that decompresses to the same bytes. Varints are
// zigzag-encoded base-128 varints, as in Kafka and encoding/binary.PutVarint;
// "varint" fields must fit an int32 in at most 5 bytes, "varlong" fields an
// int64:
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - baseTimestamp
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 means a null key
//	key             bytes
//	valueLength     varint   -1 means a null value
//	value           bytes
//	headerCount     varint
//	headers         headerCount times:
//	    keyLength   varint   >= 0 (header keys are never null)
//	    key         bytes    a string
//	    valueLength varint   -1 means a null value
//	    value       bytes
//
// # What the broker may rewrite
//
// Only baseOffset (@0) and partitionLeaderEpoch (@12). Neither is covered by
// the CRC, so SetBaseOffset and SetPartitionLeaderEpoch keep a batch valid
// without recomputing anything, and the broker never needs to decompress or
// recompress a batch to store it. Any other change invalidates the CRC.
//
// The log cleaner (package partlog) is the exception: it rewrites stored
// batches to drop superseded records, as Kafka's does. ForEach hands out each
// record's encoded bytes, and PutHeader writes a header (recomputing
// batchLength and the CRC) over a section made of some of them, so a batch
// keeps its base offset, lastOffsetDelta, timestamps and producer fields
// while its records' offset deltas then skip. With AppendWithOffsetDelta it
// lowers a batch's base offset over records removed before it, and PutHeader
// writes batches of no records that only cover a range of offsets. Records
// and ValidateStored accept all of these; ValidateProduced refuses them, as a
// producer never sends one.
//
// # Validation
//
// ParseHeader checks what the header alone can tell; Next checks a whole batch
// (length, size limit, CRC) and returns its size so callers can walk
// concatenated batches; ValidateProduced adds the checks a broker applies to a
// batch a producer sent, ValidateStored those a batch copied from a log
// (a follower's) must pass, compacted shapes included. None of them allocates on success, nor looks inside
// the records section: Records decodes it, and is for tests, the harness and
// tools rather than the produce path.
//
// Every error for bad bytes satisfies errors.Is(err, ErrCorrupt) and also
// names the specific problem (ErrShort, ErrBadLength, ErrBadMagic, ErrBadCRC,
// ErrBadRecords). ErrShort alone may mean "not all bytes yet" (a torn tail of
// a log, or the partial last batch a Kafka fetch response may carry) rather
// than damage.
package record

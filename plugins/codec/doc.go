// Package codec compresses and decompresses the records section of Kafka
// record batches: the [Codec] interface, the built-in codecs behind a
// registry of specs, and (in sub-packages) the conformance suite every codec
// must pass and the go-plugin shim for external codecs.
//
// A batch's attributes carry a codec id in bits 0-2; the 61-byte header stays
// plain and everything after it, the records section, is one compressed
// block. A codec therefore works on one batch per call, never one record:
// an external codec costs a process round trip per call (~0.1 ms).
//
// # Built-ins
//
//	spec                id  library                  parameters (default)      format written
//	none                0   -                        -                         the section, copied
//	gzip[:level=L]      1   klauspost/compress/gzip  L = 1..9 (6, Kafka's)     one RFC 1952 member
//	snappy              2   golang/snappy            -                         xerial framing (below)
//	lz4[:level=L]       3   pierrec/lz4/v4           L = 0..9 (0 = fast)       LZ4 frame, 64 KiB blocks
//	zstd[:level=L]      4   klauspost/compress/zstd  L = 1..4 (2)              one frame with content size
//
// Levels: gzip's are zlib's (Kafka's compression.gzip.level default -1 means
// zlib's 6; franz-go and sarama leave klauspost's default, its level 5).
// lz4's 0 is pierrec/lz4's Fast, franz-go's and sarama's default; 1..9 are
// its Level1..Level9 (slower, smaller). zstd's are klauspost's encoder
// levels: 1 fastest (about zstd -1), 2 default (about zstd -3, Kafka's and
// franz-go's default), 3 better (about -7), 4 best (about -11). Levels only
// change what Compress writes: Decompress reads any level.
//
// [New] builds a codec from a spec ("zstd:level=4"), [Register] adds more,
// and [Names] and [Infos] list them. Every built-in implements fmt.Stringer,
// returning the spec with its level spelled out ("zstd:level=2"), which New
// turns back into an equal codec. [Standard] returns the built-in for a
// Kafka id at its default level and [Decompress] dispatches by id: enough to
// read any batch a Kafka client wrote.
//
// # What each built-in accepts and writes, and why
//
// Every byte a built-in writes must be readable by every Kafka client, and
// Decompress must read whatever any client writes. The four checked here
// (the JVM client, librdkafka 2.0 as kcat, franz-go 1.22, sarama 1.61)
// agree except on snappy:
//
//	client       writes snappy as            reads
//	JVM          xerial framing              xerial, and raw (snappy-java falls back when the magic is absent)
//	librdkafka   raw snappy                  both
//	franz-go     raw (xerial when streaming) both
//	sarama       xerial framing              both
//
// The xerial framing is snappy-java's SnappyOutputStream: the magic
// "\x82SNAPPY\x00", two big-endian int32s (version 1, minimum compatible
// version 1), then for each block of at most 32 KiB of input a big-endian
// int32 length and a raw snappy block. Raw snappy is one snappy block of the
// whole section. Decompress tells them apart by the magic (raw snappy cannot
// begin with it: its first element would be a back-reference with nothing
// before it) and reads both. Compress writes xerial because it is what Kafka
// itself and its reference client write, so any consumer that reads a real
// Kafka cluster reads weir's batches; the price is 16 bytes plus 4 per
// 32 KiB block, and the blocks bound a streaming reader's memory. (An empty
// input compresses to raw snappy's single zero byte, because franz-go
// misreads a header-only xerial stream; batches always hold a record.)
//
// lz4 is the LZ4 frame format (magic 0x184D2204) that Kafka uses for magic
// 1 and 2 batches; magic 0's broken header checksum does not concern
// RecordBatch v2. Compress writes what the JVM producer and sarama write:
// independent 64 KiB blocks (the JVM reader rejects dependent ones), no
// block checksums, and a content checksum like franz-go and sarama (the JVM
// reader skips it; librdkafka verifies it). gzip is one RFC 1952 member;
// Decompress reads concatenated members too. zstd is one frame that declares
// its content size, as franz-go and sarama write it, so a reader can size
// its output once; librdkafka (seen in the e2e interop test) and the JVM
// producer (a zstd-jni output stream) write frames without one, which
// Decompress reads by streaming under the limit.
//
// # Limits and errors
//
// DecompressRequest.MaxSize bounds the output. Each built-in refuses before
// decoding when the input declares a larger size (snappy's length preamble,
// zstd's content size), and otherwise stops as soon as the output passes the
// limit, so a small malicious input (a decompression bomb) cannot make it
// allocate much more than MaxSize. Exactly MaxSize bytes is fine. A size the
// input declares (gzip's ISIZE trailer, zstd's content size) is the sender's
// word: it sizes the first allocation only up to a small multiple of the
// input (gzip 4x + 64 KiB, zstd 16x + 1 MiB), and a larger output grows as
// it actually arrives. zstd frames are decoded in memory, never through the
// streaming decoder, which would allocate the window a frame declares (up to
// 128 MiB for a 20-byte frame) however little it holds; a window larger than
// the limit is lowered to it, since no back-reference of an output within
// the limit reaches further. Over it, the
// error wraps [ErrTooLarge]; input that does not decode (garbage, truncated,
// trailing bytes, an empty section) wraps [ErrCorrupt] and names the codec.
//
// Built-ins check ctx once, on entry, and return ctx.Err() when it has
// ended: they do no I/O and a call lasts milliseconds, so checking mid-way
// would cost more than it saves. External codecs must honour ctx throughout
// (see the conformance suite, codec/codectest).
//
// # Memory
//
// The coders hold large tables (a zstd encoder several MiB, a gzip writer
// ~1 MiB), so they are pooled with sync.Pool: zstd encoders, gzip writers
// and lz4 writers per level, and their readers. A pooled zstd decoder keeps
// only its block buffers (~128 KiB each), never an output or a window, so the
// pool cannot pin what one hostile batch made it allocate. Outputs are fresh
// slices the caller owns, never aliases of the input or of a pooled buffer.
package codec

// Package kgoadapt plugs weir's plugin kinds into franz-go (kgo), so a Go
// producer or consumer can use exactly the implementation a weir topic,
// experiment or plugin uses: the same spec, the same code, whether built in
// or external.
//
// Each adapter wraps one weir interface in the kgo interface that franz-go
// accepts in its options; the weir interface stays the single definition,
// and franz-go stays unaware of weir. Adapters cross into the wrapped
// implementation once per batch, as the weir interfaces require, so an
// external plugin costs one process round trip per batch, not per record.
//
// Codecs (codec.go): [Compressor] for kgo.WithCompressor and [Decompressor]
// for kgo.WithDecompressor. With them a producer can write batches with a
// custom codec id (5-7) or a standard id at a chosen level, and a consumer
// can read them.
package kgoadapt

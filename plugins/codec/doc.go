// Package codec will hold the Codec interface (compress or decompress one
// batch's records section), the built-in codecs (none, gzip, snappy, lz4, zstd)
// and the go-plugin shim for external codecs.
package codec

package partitioner

import "hash/crc32"

// The hash functions of the clients the built-ins mimic, with the exact
// arithmetic each client applies to turn a hash into a partition. Each is
// checked against the client's own code (unit tests) and against the client
// producing to a real broker (transport/e2e).

// Murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2):
// MurmurHash2, 32-bit, seed 0x9747b28c, little-endian 4-byte blocks, the
// Java client's default key hash. librdkafka's murmur2 partitioners and
// franz-go's StickyKeyPartitioner use the same function.
func Murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// murmur2Partition is the Java client's toPositive(murmur2(key)) % n.
func murmur2Partition(key []byte, n int32) int32 {
	return int32(Murmur2(key)&0x7fffffff) % n
}

// crc32Partition is librdkafka's rd_crc32(key) % partition_cnt: CRC-32 with
// the IEEE polynomial (zlib's), and C's unsigned modulo (the int32 count
// converts to unsigned).
func crc32Partition(key []byte, n int32) int32 {
	return int32(crc32.ChecksumIEEE(key) % uint32(n))
}

// FNV1a is the 32-bit FNV-1a hash (hash/fnv's New32a), sarama's default key
// hash.
func FNV1a(b []byte) uint32 {
	const (
		offset uint32 = 2166136261
		prime  uint32 = 16777619
	)
	h := offset
	for _, c := range b {
		h ^= uint32(c)
		h *= prime
	}
	return h
}

// fnv1aPartition is sarama's NewHashPartitioner arithmetic: the hash as a
// signed int32, Go's truncated modulo, then the absolute value (not Java's
// mask of the sign bit, so sarama and the Java client disagree on half the
// keys even with the same hash).
func fnv1aPartition(key []byte, n int32) int32 {
	p := int32(FNV1a(key)) % n
	if p < 0 {
		p = -p
	}
	return p
}

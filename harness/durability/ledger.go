package durability

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
)

// Every record value the experiment produces starts with a header that
// makes it self-checking and traceable to its ledger entry:
//
//	0       8          16     20
//	+-------+----------+------+---------
//	| id    | sent     | crc  | payload
//	| u64   | i64 (ns) | u32  | seeded random bytes
//	+-------+----------+------+---------
//
// id is the producer's index in the top 16 bits and its sequence number in
// the low 48; sent is the Unix time in ns at which the record was handed to
// the client; crc is the CRC-32C of the value without the crc field. All
// big-endian. A record served with a wrong crc is corrupt even if its
// batch's CRC (which the broker's client checks) is right.
const (
	headerSize = 20
	// MinMessageSize is the smallest record value: the header alone.
	MinMessageSize = headerSize

	seqBits = 48
	seqMask = 1<<seqBits - 1
	// postProducer marks the records produced after recovery.
	postProducer = 1<<16 - 1
	// maxProducers keeps producer indexes below postProducer.
	maxProducers = postProducer
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordID(producer int, seq uint64) uint64 { return uint64(producer)<<seqBits | seq&seqMask }

func splitID(id uint64) (producer int, seq uint64) { return int(id >> seqBits), id & seqMask }

// seal writes the header into v (len(v) >= headerSize, payload already in
// place) and returns the value's checksum, the one the ledger keeps.
func seal(v []byte, id uint64, sent int64) uint32 {
	binary.BigEndian.PutUint64(v[0:], id)
	binary.BigEndian.PutUint64(v[8:], uint64(sent))
	sum := valueCRC(v)
	binary.BigEndian.PutUint32(v[16:], sum)
	return sum
}

func valueCRC(v []byte) uint32 {
	c := crc32.Update(0, castagnoli, v[:16])
	return crc32.Update(c, castagnoli, v[headerSize:])
}

// open checks a served value and returns its id and checksum.
func open(v []byte) (id uint64, sum uint32, err error) {
	if len(v) < headerSize {
		return 0, 0, fmt.Errorf("%w: value of %d bytes, header needs %d", ErrCorrupt, len(v), headerSize)
	}
	sum = binary.BigEndian.Uint32(v[16:])
	if got := valueCRC(v); got != sum {
		return 0, 0, fmt.Errorf("%w: value checksum 0x%08x, computed 0x%08x", ErrCorrupt, sum, got)
	}
	return binary.BigEndian.Uint64(v[0:]), sum, nil
}

// State of a ledger entry.
const (
	pending uint8 = iota // handed to the client, no answer yet
	acked                // acknowledged (the promise returned no error)
	failed               // the promise returned an error
)

// entry is what the ledger knows of one record.
type entry struct {
	topic, partition int32 // topic index
	size             int32 // value bytes
	sum              uint32
	state            uint8
	sent, ack        int64 // Unix ns; ack is 0 until acknowledged
	offset           int64 // acknowledged offset; -1 before
}

// ledger is one producer's record of everything it attempted, indexed by
// sequence number. The producing goroutine appends; franz-go's promises
// resolve, from its own goroutines, so both lock mu.
type ledger struct {
	mu      sync.Mutex
	entries []entry
	// errors counts the records that failed, by error message.
	errors map[string]int64
}

// resolve records a promise's outcome.
func (l *ledger) resolve(seq uint64, offset, now int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq >= uint64(len(l.entries)) {
		return // not ours: cannot happen, the id came from add
	}
	e := &l.entries[seq]
	if err != nil {
		e.state = failed
		if l.errors == nil {
			l.errors = map[string]int64{}
		}
		l.errors[err.Error()]++
		return
	}
	e.state, e.ack, e.offset = acked, now, offset
}

// snapshot copies the entries (after every promise has resolved).
func (l *ledger) snapshot() []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]entry(nil), l.entries...)
}

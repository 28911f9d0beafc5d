package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/node"
)

// The Fetch response is written by hand so that record bytes go from the
// segment file to the socket with sendfile(2) instead of through user space.
// Layout of the non-flexible versions served (v4-v11), after the size prefix:
//
//	correlationID int32                            (response header v0)
//	throttleMillis int32                           v1+
//	errorCode int16, sessionID int32               v7+
//	topics [int32 count]
//	  topic string (int16 length)
//	  partitions [int32 count]
//	    partition int32, errorCode int16
//	    highWatermark int64, lastStableOffset int64
//	    logStartOffset int64                       v5+
//	    abortedTransactions [int32 count]          read_committed: producerId int64, firstOffset int64 each
//	    preferredReadReplica int32                 v11+, always -1
//	    records int32 length + bytes               whole batches from one segment
//
// Everything but the record bytes is known before writing starts, so the size
// prefix is exact; the record bytes are a node.Records range of a segment
// file that only grows at its end, and the Records keep the file open.

// fetchBufSize is the pooled buffer for headers and for the copy path's
// chunks: the fetch path allocates nothing per byte served.
const fetchBufSize = 256 << 10

var fetchBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, fetchBufSize)
	return &b
}}

// fetchResponse is a Fetch response being built (by handleFetch) and then
// written (by writeTo).
type fetchResponse struct {
	version   int16
	errCode   int16
	sessionID int32
	topics    []fetchTopic

	// While long polling: the partitions watched, by key (api_fetch.go's
	// watch), and the count of re-reads, which tells a partition already
	// re-read in this one.
	watched []*fetchPart
	round   int
}

type fetchTopic struct {
	name  string
	parts []fetchPart
}

type fetchPart struct {
	index    int32
	errCode  int16
	hw       int64 // high watermark
	lso      int64 // last stable offset
	logStart int64
	records  node.Records // empty when no records
	// aborted: the aborted transactions among the records
	// (read_committed), for the client to drop.
	aborted []logs.AbortedTxn

	// What the request asked for, for re-reads while long polling.
	p         *node.Partition // nil: errCode says why
	committed bool            // read_committed: aborted transactions listed
	offset    int64
	maxBytes  int64
	readLimit int64 // what the last read went up to (the high watermark, or a follower's log end)
	// Produce appends in progress to wait for (appendsInFlight).
	appendMark int64
	appending  bool
	round      int // the fetchResponse.round it was last re-read in
}

// size is the frame size after the size prefix: correlation ID and body.
func (r *fetchResponse) size() int64 {
	n := int64(4 + 4) // correlation ID, topic count
	if r.version >= 1 {
		n += 4
	}
	if r.version >= 7 {
		n += 2 + 4
	}
	part := int64(4 + 2 + 8 + 8 + 4 + 4) // index, error, hw, lso, aborted count, records length
	if r.version >= 5 {
		part += 8
	}
	if r.version >= 11 {
		part += 4
	}
	for _, t := range r.topics {
		n += 2 + int64(len(t.name)) + 4
		for _, p := range t.parts {
			n += part + p.records.Len() + 16*int64(len(p.aborted))
		}
	}
	return n
}

func (r *fetchResponse) release() {
	for _, t := range r.topics {
		for i := range t.parts {
			t.parts[i].records.Release()
		}
	}
}

// writeTo writes the frame: fields from memory through a pooled buffer, record
// bytes with sendfile when the connection and the segment file allow it
// (TCP_CORK holds back partial packets meanwhile), else copied in chunks
// through the same buffer.
func (r *fetchResponse) writeTo(c *conn, corr int32) (err error) {
	size := r.size()
	if size > 1<<31-1 {
		return fmt.Errorf("%w: fetch response of %d bytes", errClose, size)
	}
	bp := fetchBufs.Get().(*[]byte)
	w := fetchWriter{c: c, buf: (*bp)[:0]}
	defer func() {
		if cap(w.buf) == fetchBufSize {
			*bp = w.buf[:0]
			fetchBufs.Put(bp)
		}
		c.s.m.sent(int(size) + 4)
	}()
	if c.raw != nil && r.hasOSFile() {
		setCork(c.raw, true)
		defer setCork(c.raw, false)
	}

	b := binary.BigEndian.AppendUint32(w.buf, uint32(size))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if r.version >= 1 {
		b = binary.BigEndian.AppendUint32(b, 0) // throttle
	}
	if r.version >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(r.errCode))
		b = binary.BigEndian.AppendUint32(b, uint32(r.sessionID))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.topics)))
	for _, t := range r.topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t.name)))
		b = append(b, t.name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(t.parts)))
		for i := range t.parts {
			p := &t.parts[i]
			b = binary.BigEndian.AppendUint32(b, uint32(p.index))
			b = binary.BigEndian.AppendUint16(b, uint16(p.errCode))
			b = binary.BigEndian.AppendUint64(b, uint64(p.hw))
			b = binary.BigEndian.AppendUint64(b, uint64(p.lso))
			if r.version >= 5 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.logStart))
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(p.aborted)))
			for _, a := range p.aborted {
				b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
				b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
			}
			if r.version >= 11 {
				b = binary.BigEndian.AppendUint32(b, 0xffffffff) // no preferred read replica
			}
			b = binary.BigEndian.AppendUint32(b, uint32(p.records.Len()))
			w.buf = b
			if p.records.Len() > 0 {
				if err := w.records(&p.records); err != nil {
					return err
				}
			}
			if len(w.buf) > fetchBufSize-1024 {
				if err := w.flush(); err != nil {
					return err
				}
			}
			b = w.buf
		}
	}
	w.buf = b
	return w.flush()
}

func (r *fetchResponse) hasOSFile() bool {
	for _, t := range r.topics {
		for _, p := range t.parts {
			if _, _, ok := p.records.OSFile(); ok {
				return true
			}
		}
	}
	return false
}

// fetchWriter accumulates a response's bytes in buf and sends records.
type fetchWriter struct {
	c   *conn
	buf []byte
}

func (w *fetchWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.c.nc.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// records sends a range's bytes: sendfile from an OS file, else chunks read
// into the buffer's free space.
func (w *fetchWriter) records(recs *node.Records) error {
	if f, fpos, ok := recs.OSFile(); ok && w.c.raw != nil {
		if err := w.flush(); err != nil {
			return err
		}
		return sendfile(w.c.raw, f, fpos, recs.Len())
	}
	pos, end := int64(0), recs.Len()
	for pos < end {
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		free := w.buf[len(w.buf):cap(w.buf)]
		if n := end - pos; int64(len(free)) > n {
			free = free[:n]
		}
		n, err := recs.ReadAt(free, pos)
		if n < len(free) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%w: reading records of %s at %d: %v", errClose, recs.Name(), pos, err)
		}
		w.buf = w.buf[:len(w.buf)+n]
		pos += int64(n)
	}
	return nil
}

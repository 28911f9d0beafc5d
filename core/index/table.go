package index

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/core/vfs"
)

// ErrCorrupt reports an index file that is not a whole number of well-ordered
// entries, or whose entries point outside the log. The caller rebuilds the index.
var ErrCorrupt = errors.New("index: corrupt")

// codec encodes one kind of entry.
type codec[E any] interface {
	size() int
	put(b []byte, e E)
	get(b []byte) E
	// ordered reports whether next may follow prev in a valid index.
	ordered(prev, next E) bool
}

// table is the shared machinery of both indexes: entries in memory published to
// readers through an atomic pointer, and a file that receives them lazily.
type table[E any, C codec[E]] struct {
	c       C
	entries atomic.Pointer[[]E] // readers load this; the writer replaces it

	mu      sync.Mutex // guards everything below (writer side only)
	written int        // entries already in the file
	buf     []byte     // encoding scratch space
}

func (t *table[E, C]) init(es []E, written int) {
	t.written = written
	t.entries.Store(&es)
}

// load reads every entry of f. A file that is not a whole number of entries, or
// whose entries are out of order, is ErrCorrupt.
func (t *table[E, C]) load(f vfs.File) error {
	size, err := f.Size()
	if err != nil {
		return err
	}
	es := t.c.size()
	if size%int64(es) != 0 {
		return fmt.Errorf("%w: %s: size %d is not a multiple of %d", ErrCorrupt, f.Name(), size, es)
	}
	if size > 1<<32 {
		return fmt.Errorf("%w: %s: size %d is implausible", ErrCorrupt, f.Name(), size)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("index: read %s: %w", f.Name(), err)
	}
	entries := make([]E, 0, size/int64(es))
	for off := 0; off < len(b); off += es {
		e := t.c.get(b[off:])
		if n := len(entries); n > 0 && !t.c.ordered(entries[n-1], e) {
			return fmt.Errorf("%w: %s: entry %d out of order", ErrCorrupt, f.Name(), n)
		}
		entries = append(entries, e)
	}
	t.init(entries, len(entries))
	return nil
}

// snapshot returns the entries visible now. The slice must not be modified.
func (t *table[E, C]) snapshot() []E {
	if p := t.entries.Load(); p != nil {
		return *p
	}
	return nil
}

// append adds e after the last entry. Writer only.
func (t *table[E, C]) append(e E) {
	cur := t.snapshot()
	var next []E
	if len(cur) < cap(cur) {
		// Readers hold slices no longer than len(cur), so writing past it is safe.
		next = append(cur, e)
	} else {
		next = make([]E, len(cur)+1, 2*cap(cur)+16)
		copy(next, cur)
		next[len(cur)] = e
	}
	t.entries.Store(&next)
}

// truncate keeps the first n entries, in memory and in f. Writer only.
func (t *table[E, C]) truncate(n int, f vfs.File) error {
	cur := t.snapshot()
	if n >= len(cur) {
		return nil
	}
	// Copy, so a reader holding the longer slice never sees entries re-written under it.
	kept := append([]E(nil), cur[:n]...)
	t.entries.Store(&kept)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written > n {
		if err := f.Truncate(int64(n * t.c.size())); err != nil {
			return fmt.Errorf("index: truncate %s: %w", f.Name(), err)
		}
		t.written = n
	}
	return nil
}

// write appends the entries not yet in f to it.
func (t *table[E, C]) write(f vfs.File) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.snapshot()
	if t.written >= len(cur) {
		return nil
	}
	es := t.c.size()
	pending := cur[t.written:]
	t.buf = t.buf[:0]
	for _, e := range pending {
		var b [16]byte
		t.c.put(b[:es], e)
		t.buf = append(t.buf, b[:es]...)
	}
	if _, err := f.Write(t.buf); err != nil {
		// The file may now hold part of the pending entries; cut it back so the
		// next write starts on an entry boundary.
		_ = f.Truncate(int64(t.written * es))
		return fmt.Errorf("index: write %s: %w", f.Name(), err)
	}
	t.written = len(cur)
	return nil
}

// sync writes pending entries to f and fsyncs it.
func (t *table[E, C]) sync(f vfs.File) error {
	if err := t.write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", f.Name(), err)
	}
	return nil
}

// pending reports whether some entries have not been written.
func (t *table[E, C]) pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written < len(t.snapshot())
}

// reset drops every entry, in memory; the caller truncates the file.
func (t *table[E, C]) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written = 0
	t.entries.Store(new([]E))
}

// memBytes is the heap the entries hold.
func (t *table[E, C]) memBytes() int { return cap(t.snapshot()) * t.c.size() }

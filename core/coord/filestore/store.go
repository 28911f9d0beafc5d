package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/internal/tree"
	"github.com/weir-broker/weir/core/vfs"
)

// Options configure Open.
type Options struct {
	// FS is the file system; nil means vfs.Default.
	FS vfs.FS
	// Dir is the directory of the files (created if missing); required.
	Dir string
	// CompactBytes: a write that leaves the journal larger than
	// max(CompactBytes, the snapshot's size) compacts it (see the package
	// doc). 0 means DefaultCompactBytes (4 MiB); negative is an error.
	CompactBytes int64
}

func (o *Options) validate() error {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Dir == "" {
		return errors.New("filestore: Options.Dir is empty")
	}
	switch {
	case o.CompactBytes < 0:
		return fmt.Errorf("filestore: Options.CompactBytes %d is negative", o.CompactBytes)
	case o.CompactBytes == 0:
		o.CompactBytes = DefaultCompactBytes
	}
	return nil
}

// Store is the one session on a directory; it implements coord.Store.
//
// Writes go through a queue: the first request to find no leader leads,
// taking every queued request as one batch: it applies them under mu to
// learn their records, rolls them back, appends the records and fsyncs
// without mu (so reads go on, seeing only what is durable, and requests
// that arrive queue for the next batch), then applies them again under mu,
// commits and answers them. Only the leader changes the tree, so applying
// again gives the same results; then it hands the lead to the next queued
// request.
type Store struct {
	mu      sync.Mutex
	tree    *tree.Tree
	id      int64
	state   coord.SessionState
	changed chan struct{}
	closing bool // Close waits for the leader; no request may queue
	// unsynced: an append failed and cutting it off failed too, so what is
	// on disk is unknown; memory holds the change, and the next batch first
	// writes a snapshot of it.
	unsynced bool
	queue    []*pending
	leading  bool
	idle     *sync.Cond // on mu: the leader is done

	files files // the leader's (Open's, Close's) only
}

// pending is a queued request.
type pending struct {
	r    *request // with no ops: only make the store durable again
	res  []coord.OpResult
	err  error
	zxid int64         // the zxid the first pass took, 0 for none
	wake chan struct{} // closed when answered, or when it is to lead
	lead bool
}

var _ coord.Store = (*Store)(nil)

// Open loads the snapshot and replays the journal in o.Dir (a missing file
// is empty; a corrupt one an error wrapping ErrCorrupt), cuts off a torn
// tail of the journal, and starts a session.
func Open(o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Store{changed: make(chan struct{}), files: files{fs: o.FS, dir: o.Dir, compact: o.CompactBytes,
		snap: filepath.Join(o.Dir, FileName), log: filepath.Join(o.Dir, JournalName)}}
	s.idle = sync.NewCond(&s.mu)
	j := &s.files
	if err := j.fs.MkdirAll(j.dir, 0o755); err != nil {
		return nil, fmt.Errorf("filestore: open: %w", err)
	}
	for _, name := range []string{tmpFileName, journalTmpName} {
		if err := j.fs.Remove(filepath.Join(j.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("filestore: open: remove the leftover %s: %w", name, err)
		}
	}
	t, sc, exists, err := j.load()
	if err != nil {
		return nil, err
	}
	if err := j.openJournal(sc, exists); err != nil {
		_ = j.close()
		return nil, fmt.Errorf("filestore: open: %w", err)
	}
	s.tree = t
	s.id = t.Bump() // the new session's creation, recorded before it is used
	if err, _ := j.append(appendRecord(nil, s.id, nil)); err != nil {
		_ = j.close()
		return nil, fmt.Errorf("filestore: open: %w", err)
	}
	s.state = coord.Connected
	s.maybeCompact()
	return s, nil
}

// maybeCompact compacts if the journal is past its bound. A failure loses
// nothing (the journal holds everything) and is tried again once the
// journal has grown by another bound. The caller leads or holds the only
// reference, and does not hold mu.
func (s *Store) maybeCompact() {
	if s.files.size > s.files.bound() {
		_, _ = s.compact()
	}
}

// compact writes a snapshot of the tree and starts a fresh journal; see
// files.compactTo. The caller leads and does not hold mu.
func (s *Store) compact() (durable bool, err error) {
	s.mu.Lock()
	zxid, nodes := s.tree.Persistent() // their data stays as it is: only the leader changes the tree
	s.mu.Unlock()
	return s.files.compactTo(zxid, nodes)
}

func (s *Store) setState(st coord.SessionState) {
	if s.state == st {
		return
	}
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

// Session implements coord.Store: Connected, or Connecting while what is on
// disk is unknown, or Closed.
func (s *Store) Session() coord.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return coord.Session{ID: s.id, State: s.state, Changed: s.changed}
}

// Close implements coord.Store. It waits for the writes under way, ends the
// session (which deletes only ephemeral nodes, which no file holds, but
// takes a zxid if there were any), and compacts if the journal holds records
// or the session's end took a zxid, so that a store closed cleanly is all in
// its snapshot. A failed compaction loses nothing
// (the journal holds everything) but is reported; a store that was unsure
// of its disk and cannot write its snapshot reports that.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.state == coord.Closed || s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	for s.leading {
		s.idle.Wait()
	}
	s.tree.DropWatches(s.id, coord.ErrClosed)
	end := s.tree.EndSession(s.id)
	end.Commit()
	unsynced := s.unsynced
	s.mu.Unlock()

	var err error
	if s.files.size > int64(len(journalMagic)) || end.Changed() || unsynced {
		if durable, cerr := s.compact(); cerr != nil {
			what := "compact the journal (it holds every change)"
			if unsynced && !durable {
				what = "write the snapshot (changes whose outcome was unknown may be lost)"
			}
			err = fmt.Errorf("filestore: close: %s: %w", what, cerr)
		}
	}
	if cerr := s.files.close(); cerr != nil && err == nil {
		err = fmt.Errorf("filestore: close: %w", cerr)
	}
	s.mu.Lock()
	s.setState(coord.Closed)
	s.mu.Unlock()
	return err
}

// ready is the error for a request now, if any; the caller holds s.mu.
func (s *Store) ready(ctx context.Context, r *request) error {
	if s.state == coord.Closed || s.closing {
		return r.errorf(coord.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return r.errorf(fmt.Errorf("%w (%w)", coord.ErrConnectionLoss, err))
	}
	return nil
}

type request struct {
	kind string
	path string // "" for a Multi
	ops  []coord.Op
}

func (r *request) validate() error {
	if r.kind != "multi" {
		if err := coord.ValidatePath(r.path); err != nil {
			return r.errorf(err)
		}
		return nil
	}
	for i, op := range r.ops {
		if err := coord.ValidatePath(op.OpPath()); err != nil {
			return r.errorf(&coord.MultiError{Index: i, Op: op, Err: err})
		}
	}
	return nil
}

// stepError is the error of the request when its op i failed with err.
func (r *request) stepError(i int, err error) error {
	if r.kind == "multi" {
		err = &coord.MultiError{Index: i, Op: r.ops[i], Err: err}
	}
	return r.errorf(err)
}

func (r *request) errorf(err error) error {
	if r.kind == "multi" {
		var me *coord.MultiError
		if errors.As(err, &me) {
			return fmt.Errorf("filestore: %w", err)
		}
		return fmt.Errorf("filestore: multi: %w", err)
	}
	return fmt.Errorf("filestore: %s %s: %w", r.kind, r.path, err)
}

// read runs fn on the tree under the lock once the request may go ahead:
// if what is on disk is unknown, once a batch has made it durable again.
func (s *Store) read(ctx context.Context, r *request, fn func() error) error {
	if err := r.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx, r); err != nil {
		return err
	}
	if s.unsynced {
		s.mu.Unlock()
		_, err := s.submit(ctx, &request{kind: r.kind, path: r.path})
		s.mu.Lock()
		if err != nil {
			return err
		}
		if err := s.ready(ctx, r); err != nil {
			return err
		}
		if s.unsynced { // a write since failed the same way
			return r.errorf(fmt.Errorf("%w: the store is unsure of its disk", coord.ErrConnectionLoss))
		}
	}
	if err := fn(); err != nil {
		return r.errorf(err)
	}
	return nil
}

// write applies the request's operations and journals them, or changes
// nothing.
func (s *Store) write(ctx context.Context, r *request) ([]coord.OpResult, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	return s.submit(ctx, r)
}

// submit queues p and waits for its answer, leading a batch if no one else
// does.
func (s *Store) submit(ctx context.Context, r *request) ([]coord.OpResult, error) {
	s.mu.Lock()
	if err := s.ready(ctx, r); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	p := &pending{r: r, wake: make(chan struct{})}
	s.queue = append(s.queue, p)
	if s.leading {
		s.mu.Unlock()
		<-p.wake
		if !p.lead {
			return p.res, p.err
		}
		s.mu.Lock()
	}
	s.leading = true
	batch := s.queue
	s.queue = nil
	compact := s.commit(batch)
	s.mu.Unlock()
	if compact {
		s.maybeCompact()
	}
	s.mu.Lock()
	if len(s.queue) > 0 {
		next := s.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		s.leading = false
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	return p.res, p.err
}

// commit runs a batch and answers its requests (all but the leader's by
// closing their wake). It is called and returns with mu held, but releases
// it around file I/O. It returns whether records were appended, so the
// journal may need compacting.
func (s *Store) commit(batch []*pending) (appended bool) {
	defer func() {
		for _, p := range batch {
			if !p.lead {
				close(p.wake)
			}
		}
	}()
	failAll := func(err error) {
		for _, p := range batch {
			p.res, p.err = nil, p.r.errorf(err)
		}
	}
	if s.unsynced {
		s.mu.Unlock()
		durable, err := s.compact()
		s.mu.Lock()
		if !durable {
			failAll(fmt.Errorf("%w: %w", coord.ErrConnectionLoss, err))
			return false
		}
		s.unsynced = false
		s.setState(coord.Connected)
	}

	// First pass: what the batch would do, and its records.
	var buf []byte
	tx := s.tree.Begin()
	for _, p := range batch {
		if len(p.r.ops) == 0 {
			continue
		}
		st, i, err := tx.Step(s.id, p.r.ops)
		if err != nil {
			p.err = p.r.stepError(i, err)
			continue
		}
		p.res, p.zxid = st.Results, st.Zxid
		if st.Zxid != 0 {
			buf = appendRecord(buf, st.Zxid, st.Changes)
		}
	}
	if len(buf) == 0 {
		tx.Commit() // checks only, or failures
		return false
	}
	tx.Rollback() // memory holds only what is durable while the journal is written

	s.mu.Unlock()
	err, cut := s.files.append(buf)
	s.mu.Lock()
	if err != nil && cut {
		failAll(err) // the results of the batch's reads and failures may have depended on its writes
		return false
	}

	// Second pass: apply again, for good.
	tx = s.tree.Begin()
	for _, p := range batch {
		if len(p.r.ops) == 0 {
			continue
		}
		st, i, err2 := tx.Step(s.id, p.r.ops)
		if (err2 != nil) != (p.err != nil) || st.Zxid != p.zxid {
			panic(fmt.Sprintf("filestore: %s %s applied differently the second time: zxid %d, then %d (%v)",
				p.r.kind, p.r.path, p.zxid, st.Zxid, err2))
		}
		if err2 != nil {
			p.err = p.r.stepError(i, err2)
		} else {
			p.res = st.Results
		}
	}
	tx.Commit()
	if err != nil { // and not cut: the outcome is unknown
		s.unsynced = true
		s.setState(coord.Connecting)
		failAll(fmt.Errorf("%w: %w", coord.ErrConnectionLoss, err))
		return false
	}
	return true
}

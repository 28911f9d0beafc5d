package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/topicconfig"
)

// offsetsTopicConfigs are the configs OffsetsTopic is created with and always
// opened with (Kafka's offsets.topic.* defaults): compacted, so the last
// commit of every group and partition stays and the rest goes; segments of
// Config.OffsetsSegmentBytes (100 MiB), so the cleaner has sealed segments
// to work on.
func (n *Node) offsetsTopicConfigs() map[string]string {
	return map[string]string{
		topicconfig.CleanupPolicy: topicconfig.CleanupCompact,
		topicconfig.SegmentBytes:  strconv.FormatInt(n.cfg.OffsetsSegmentBytes, 10),
	}
}

// offsetsPartitionFor is the partition of OffsetsTopic that holds group:
// Kafka's abs(hash(group)) % partitions, with the topic's partition count
// (Config.OffsetsPartitions before it exists).
func (n *Node) offsetsPartitionFor(group string) int32 {
	parts := n.cfg.OffsetsPartitions
	if im, _ := n.image.load(); im != nil {
		if t := im.Topics[OffsetsTopic]; t != nil && len(t.Assignment) > 0 {
			parts = int32(len(t.Assignment))
		}
	}
	return javaAbs(javaHash(group)) % parts
}

// offsetsLog is a partition of OffsetsTopic as the group coordinator's Log:
// appends go through the partition (durable acks, when configured), reads
// to its log. Comparable: the same partition is the same Log.
type offsetsLog struct{ p *replicated }

// Append appends as the leader and returns at once: its wait returns once
// the records are on disk (with durable acks: the coordinators append
// holding their lock, which must not wait for an fsync, and appends made
// meanwhile share it) and replicated to the ISR, as Kafka's coordinator
// appends with acks=all (offsets.commit.required.acks), or after
// offsetsCommitTimeout.
func (l offsetsLog) Append(ctx context.Context, b []byte) (func(context.Context) error, error) {
	return l.AppendVerified(ctx, b, producers.Unverified)
}

// AppendVerified is Append carrying the guard of a transactional offset
// commit's verification (Node.TxnOffsetCommit) to the partition's
// producer checks.
func (l offsetsLog) AppendVerified(ctx context.Context, b []byte, g producers.Guard) (func(context.Context) error, error) {
	if err := l.p.checkAppend(l.p.Settings().MinInsyncReplicas); err != nil {
		return nil, err
	}
	res, durable, err := l.p.AppendDeferredVerified(ctx, b, l.p.epoch.Load(), g)
	if err != nil {
		l.p.appended()
		return nil, err
	}
	return func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, offsetsCommitTimeout)
		defer cancel()
		// The leader counts its records toward the ISR's acks once they
		// are durable, as a produce with durable acks does.
		err := durable(actx)
		l.p.appended()
		if err != nil {
			return err
		}
		return l.p.waitAcksAll(actx, res.NextOffset, l.p.Settings().MinInsyncReplicas)
	}, nil
}

// offsetsCommitTimeout bounds a commit's wait for the ISR (Kafka's
// offsets.commit.timeout.ms).
const offsetsCommitTimeout = 5 * time.Second

func (l offsetsLog) StartOffset() int64 { return l.p.Log().StartOffset() }
func (l offsetsLog) EndOffset() int64   { return l.p.Log().EndOffset() }
func (l offsetsLog) Read(offset, maxBytes, maxOffset int64) (partlog.Slice, error) {
	return l.p.Log().Read(offset, maxBytes, maxOffset)
}

// offsetsLoads are the partitions of OffsetsTopic this broker leads and has
// handed to the group coordinator (loaded or loading), and the replays
// running.
type offsetsLoads struct {
	mu      sync.Mutex
	parts   map[int32]*replicated
	replays sync.WaitGroup
	// ended is closed (and replaced) each time a replay ends.
	ended chan struct{}
}

// replayEnded returns a channel closed when the next replay ends.
func (o *offsetsLoads) replayEnded() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended == nil {
		o.ended = make(chan struct{})
	}
	return o.ended
}

func (o *offsetsLoads) endReplay() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended != nil {
		close(o.ended)
	}
	o.ended = make(chan struct{})
}

// syncCoordinator hands the group coordinator the partitions of OffsetsTopic
// im names this broker leader of (each replayed on a goroutine of its own,
// its groups answered COORDINATOR_LOAD_IN_PROGRESS meanwhile) and takes back
// those it no longer leads. The loop calls it before publishing im, so a
// client told this broker coordinates a group finds it loading, not absent.
func (n *Node) syncCoordinator(ctx context.Context, im *meta.Image) {
	self := n.cfg.NodeID
	want := map[int32]*replicated{}
	if t := im.Topics[OffsetsTopic]; t != nil && !t.Deleting {
		for _, p := range assignedHere(t, self) {
			if im.View(t, int(p)).Leader != self {
				continue
			}
			if part, ok := n.localPartition(OffsetsTopic, t.ID, p); ok && part.leading.Load() {
				want[p] = part
			}
		}
	}
	o := &n.offsets
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts == nil {
		o.parts = map[int32]*replicated{}
	}
	for p, part := range o.parts {
		if want[p] != part {
			n.groups.Unload(p)
			delete(o.parts, p)
		}
	}
	for p, part := range want {
		if o.parts[p] == part {
			continue
		}
		o.parts[p] = part
		replay := n.groups.StartLoad(p, offsetsLog{part})
		o.replays.Add(1)
		go func() {
			defer o.replays.Done()
			err := replay(ctx)
			defer o.endReplay()
			switch {
			case err == nil:
				n.legacyDone()
			case errors.Is(err, groups.ErrNotCoordinator) || ctx.Err() != nil:
				// Moved, or shutting down: nothing to do.
			default:
				// Loaded again when the partition is handed over anew
				// (a restart, or a move); its groups meanwhile get
				// NOT_COORDINATOR.
				n.logger.Error("cannot load committed offsets", "partition", logs.DirName(OffsetsTopic, p), "err", err)
				o.mu.Lock()
				if o.parts[p] == part {
					delete(o.parts, p)
				}
				o.mu.Unlock()
			}
		}()
	}
}

// readLegacyOffsets reads the committed offsets of the old layout
// (<data>/__groups) when there are any, for importLegacyOffsets.
func (n *Node) readLegacyOffsets() error {
	dir := filepath.Join(n.cfg.DataDir, groupsDir)
	if _, err := n.cfg.FS.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	lg, err := groups.ReadLegacy(n.cfg.FS, dir, n.logger.With("component", "groups"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("node: committed offsets of the old layout: %w", err)
	}
	g, offs := lg.Groups()
	n.logger.Info("moving committed offsets into "+OffsetsTopic, "from", dir, "groups", g, "offsets", offs)
	// Handed over before any partition loads, so that each imports its
	// groups before it serves, and legacyDone counts them.
	if _, err := n.groups.Import(lg); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.offsets.mu.Lock()
	n.legacy = lg
	n.offsets.mu.Unlock()
	return nil
}

// importLegacyOffsets creates OffsetsTopic when there is none, so that its
// partitions load and import the old layout's offsets (see
// readLegacyOffsets); once every group is imported, legacyDone removes the
// old directory.
func (n *Node) importLegacyOffsets(ctx context.Context) error {
	if _, err := n.ensureOffsetsTopic(ctx); err != nil {
		n.logger.Warn("cannot create "+OffsetsTopic+" yet; the old offsets move when its partitions load", "err", err)
	}
	n.legacyDone()
	return nil
}

// legacyDone removes the old layout's directory once every group in it is
// in OffsetsTopic, after making the partitions holding them durable. Until
// then it is kept (a broker that does not lead a group's partition keeps
// it, and says so at each start).
func (n *Node) legacyDone() {
	n.offsets.mu.Lock()
	defer n.offsets.mu.Unlock()
	lg := n.legacy
	if lg == nil || n.groups.LegacyLeft() != 0 {
		return
	}
	for _, part := range n.offsets.parts {
		if err := part.Log().Flush(part.Log().EndOffset()); err != nil {
			n.logger.Warn("keeping the old offsets directory: flush failed", "dir", lg.Dir, "err", err)
			return
		}
	}
	err := n.cfg.FS.RemoveAll(lg.Dir)
	if err == nil {
		err = n.cfg.FS.SyncDir(n.cfg.DataDir)
	}
	if err != nil {
		n.logger.Warn("cannot remove the old offsets directory", "dir", lg.Dir, "err", err)
		return
	}
	n.logger.Info("committed offsets moved into "+OffsetsTopic, "removed", lg.Dir)
	n.legacy = nil
}

// legacyPending reports whether offsets of the old layout wait to move.
func (n *Node) legacyPending() bool {
	n.offsets.mu.Lock()
	defer n.offsets.mu.Unlock()
	return n.legacy != nil
}

// AwaitOffsetsLoaded waits until every partition of OffsetsTopic this broker
// leads is loaded by the group coordinator (creating the topic first when it
// does not exist), or ctx ends. Clients need not: they retry
// COORDINATOR_LOAD_IN_PROGRESS; tools and tests that go to the coordinator
// directly call it first.
func (n *Node) AwaitOffsetsLoaded(ctx context.Context) error {
	if _, err := n.ensureOffsetsTopic(ctx); err != nil {
		return err
	}
	for {
		ended := n.offsets.replayEnded()
		if n.offsetsLoaded() {
			return nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return fmt.Errorf("node: waiting for the committed offsets to load: %w", ctx.Err())
		}
	}
}

// offsetsLoaded reports whether every partition of OffsetsTopic led here
// (as the image says) is loaded.
func (n *Node) offsetsLoaded() bool {
	im, _ := n.image.load()
	t := im.Topics[OffsetsTopic]
	if t == nil {
		return false
	}
	for p := range t.Assignment {
		if im.View(t, p).Leader == n.cfg.NodeID && !n.groups.Loaded(int32(p)) {
			return false
		}
	}
	return true
}

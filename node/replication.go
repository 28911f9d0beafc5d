package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/replica"
	"github.com/weir-broker/weir/core/wakeup"
)

// replicated is a partition this broker holds a replica of: its log
// (core/logs) and its replication state (core/replica), the value behind mu
// that the node steps and whose Ready it executes (apply). What readers need
// without the lock is published: the high watermark (with a channel closed
// each time it moves, for long polls and acks=all waits), the leader epoch
// and whether this broker leads.
type replicated struct {
	*logs.Partition
	n       *Node
	topicID [16]byte

	mu sync.Mutex
	r  *replica.Replica

	hw      atomic.Int64
	epoch   atomic.Int32
	leading atomic.Bool
	// resigned: the log failed while this broker was in the ISR, and it
	// asked to be taken out (replica.LogFailed): reads are refused.
	resigned atomic.Bool
	// queryNotBefore holds the next epoch query back after a failed
	// truncation (mu).
	queryNotBefore time.Time
	hwMu           sync.Mutex
	hwCh           chan struct{} // closed and replaced when hw moves
	// readers is fired with hwCh: the long polls parked on this
	// partition (Partition.Watch).
	readers wakeup.Source

	appends appendGate     // produce appends in progress (appendgate.go)
	starts  followerStarts // the followers' log starts, for DeleteRecords (admin.go)
}

func newReplicated(n *Node, p *logs.Partition, topicID [16]byte, hw int64) *replicated {
	end := p.Log().EndOffset()
	rp := &replicated{Partition: p, n: n, topicID: topicID, hwCh: make(chan struct{}),
		r: replica.New(replica.Config{Self: n.cfg.NodeID, LagTimeMax: n.cfg.ReplicaLagTimeMax}, end, hw)}
	rp.hw.Store(rp.r.HighWatermark())
	rp.epoch.Store(-1)
	return rp
}

// highWatermark is the offset consumers read up to.
func (rp *replicated) highWatermark() int64 { return rp.hw.Load() }

// hwChanged returns a channel closed when the high watermark next moves.
func (rp *replicated) hwChanged() <-chan struct{} {
	rp.hwMu.Lock()
	defer rp.hwMu.Unlock()
	return rp.hwCh
}

func (rp *replicated) publishHW(hw int64) {
	rp.hw.Store(hw)
	rp.hwMu.Lock()
	close(rp.hwCh)
	rp.hwCh = make(chan struct{})
	rp.hwMu.Unlock()
	rp.readers.Fire()
	rp.n.hwCheckpoint.dirty()
}

// wakeAll closes the high-watermark channel and fires the readers without
// a move: waiters look again (a role change, a close).
func (rp *replicated) wakeAll() {
	rp.hwMu.Lock()
	close(rp.hwCh)
	rp.hwCh = make(chan struct{})
	rp.hwMu.Unlock()
	rp.readers.Fire()
}

// setState applies the partition's record as the image has it. A failed
// log is recovered first when the record allows it (replica.MayRecover:
// the cut back to its last fsync can no longer take away what an in-sync
// replica counts on); one that stays failed resigns again in a new term.
func (rp *replicated) setState(now time.Time, replicas []int32, st *meta.PartitionState, barred []int32) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.r.SetBarred(barred)
	was, unclean := rp.r.Role(), rp.r.IsUnclean()
	l := rp.Log()
	if l.Err() != nil {
		latest, ok := l.LatestEpoch()
		if !ok {
			latest = -1
		}
		if l.RecoveryDue() && rp.r.MayRecover(replicas, st, latest) {
			rp.recoverLocked()
		}
	}
	rp.r.SetState(now, replicas, st, l.EndOffset())
	if st != nil && rp.r.Role() != replica.Leader {
		// Before anything follows from it (a truncation, a fetch): no
		// produce append of a term this broker led may land any more,
		// however late it comes, nor one stamped with the epoch it now
		// follows (another broker's). They would sit in the log where the
		// leader has other records: replicas that differ.
		l.Fence(rp.r.Epoch() + 1)
	}
	if l.Err() != nil {
		rp.r.LogFailed()
	}
	rp.applyLocked()
	role := rp.r.Role()
	if unclean && !rp.r.IsUnclean() {
		if role == replica.Leader {
			// The controller kept it: no other in-sync replica was left.
			rp.n.logger.Warn("back from an unclean shutdown, leading alone in a new epoch: what its log lost, no in-sync replica has",
				"partition", logs.DirName(rp.Topic, rp.Index), "epoch", rp.r.Epoch(), "log_end", rp.r.LogEnd())
		} else {
			rp.n.logger.Info("back from an unclean shutdown: out of the ISR now",
				"partition", logs.DirName(rp.Topic, rp.Index), "epoch", rp.r.Epoch(), "leader", rp.r.Leader())
		}
	}
	rp.leading.Store(role == replica.Leader)
	if role == replica.None {
		rp.epoch.Store(-1)
	} else {
		rp.epoch.Store(rp.r.Epoch())
	}
	if role != was {
		// The first role after opening is one line per partition at
		// start-up (100,000 on a big broker): debug; changes are info.
		level := slog.LevelInfo
		if was == replica.None {
			level = slog.LevelDebug
		}
		rp.n.logger.Log(context.Background(), level, "replica role", "partition", logs.DirName(rp.Topic, rp.Index), "role", role.String(),
			"leader", rp.r.Leader(), "epoch", rp.r.Epoch(), "log_end", rp.r.LogEnd(), "high_watermark", rp.r.HighWatermark())
		rp.wakeAll()
	}
}

// recoverLocked recovers the failed log in place now (partlog's Recover,
// whatever HoldRecovery says). mu held.
func (rp *replicated) recoverLocked() {
	name := logs.DirName(rp.Topic, rp.Index)
	before := rp.Log().EndOffset()
	if _, err := rp.Log().Recover(); err != nil {
		rp.n.logger.Error("replica log recovery failed", "partition", name, "err", err)
		return
	}
	rp.n.logger.Warn("replica log recovered after its failure", "partition", name, "end_before", before,
		"end", rp.Log().EndOffset())
}

// logFailed tells the replica its log failed (an append, a flush or a read
// met the failure): an in-sync replica resigns (replica.LogFailed).
func (rp *replicated) logFailed() {
	if rp.Log().Err() == nil || rp.resigned.Load() {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.logFailedLocked()
}

func (rp *replicated) logFailedLocked() {
	if rp.Log().Err() == nil {
		return
	}
	rp.r.LogFailed()
	rp.applyLocked()
}

// appended tells the replica the log end moved (an append on this broker).
func (rp *replicated) appended() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.r.Appended(rp.Log().EndOffset())
	rp.applyLocked()
}

// tick lets time pass for the replica (ISR shrink).
func (rp *replicated) tick(now time.Time) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.r.Tick(now)
	rp.applyLocked()
}

// applyLocked executes the replica's Ready until it has nothing more to do
// (a truncation is followed by a fetch from its end). mu held.
func (rp *replicated) applyLocked() {
	defer func() {
		rp.Log().HoldRecovery(rp.r.HoldRecovery())
		rp.resigned.Store(rp.r.Resigned())
	}()
	for range 8 {
		rd := rp.r.Ready()
		if rd.Empty() {
			return
		}
		rp.execute(rd)
	}
}

func (rp *replicated) execute(rd replica.Ready) {
	n, name := rp.n, logs.DirName(rp.Topic, rp.Index)
	if rd.StartEpoch != nil {
		if err := rp.Log().AssignEpoch(rd.StartEpoch.Epoch, rd.StartEpoch.StartOffset); err != nil {
			n.logger.Error("cannot record the start of a leader epoch", "partition", name, "epoch", rd.StartEpoch.Epoch, "err", err)
		}
	}
	if rd.StopFetch {
		n.fetchers.remove(rp)
	}
	if rd.Truncate != nil {
		rp.cut("truncate", *rd.Truncate, func(to int64) error { return rp.Log().Truncate(to) })
	}
	if rd.Reset != nil {
		rp.cut("reset", *rd.Reset, func(at int64) error { return rp.Log().Reset(at) })
	}
	if rd.HWChanged {
		rp.publishHW(rd.HighWatermark)
	}
	if rd.QueryEpoch != nil {
		n.fetchers.query(rp, rd.QueryEpoch.Leader, rd.QueryEpoch.LeaderEpoch)
	}
	if rd.Fetch != nil {
		n.fetchers.fetch(rp, rd.Fetch.Leader, rd.Fetch.LeaderEpoch, rd.Fetch.Offset)
	}
	if rd.Propose != nil {
		n.proposeISR(rp, *rd.Propose)
	}
	if rd.Resign != nil {
		n.resignReplica(rp, *rd.Resign)
	}
}

// resignReplica writes this broker's resignation from the partition's ISR
// in leader epoch epoch (its log failed, see replica.LogFailed; or it came
// back from an unclean shutdown, see replica.Unclean), on a
// goroutine of its own (mu held), trying again every loopRetry while the replica is
// still resigned in that epoch. The controller's answer arrives as a new
// state record (setState), and the resignation is withdrawn once stale
// (withdrawResignations).
func (n *Node) resignReplica(rp *replicated, epoch int32) {
	r := meta.Resignation{Broker: n.cfg.NodeID, Topic: rp.Topic, Partition: rp.Index, LeaderEpoch: epoch}
	if err := rp.Log().Err(); err != nil {
		n.logger.Warn("replica log failed: resigning from the ISR", "partition", logs.DirName(rp.Topic, rp.Index),
			"epoch", epoch, "err", err)
	} else {
		n.logger.Warn("back from an unclean shutdown: resigning from the ISR until the controller moves the partition",
			"partition", logs.DirName(rp.Topic, rp.Index), "epoch", epoch, "role", rp.r.Role().String(),
			"log_end", rp.r.LogEnd())
	}
	n.replCounters.resignations.Inc()
	l, alone := rp.Log(), len(rp.r.ISR()) <= 1 // mu held
	go func() {
		// Alone in the ISR, it will lead again in the next epoch: let the
		// log's backoff pass first, so that the new term finds it due for
		// its recovery instead of failing and resigning again at once.
		for alone && l.Err() != nil && !l.RecoveryDue() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-n.ctx.Done():
				return
			}
		}
		for {
			ctx, cancel := context.WithTimeout(n.ctx, storeTimeout)
			err := layout.ResignReplica(ctx, n.store, r)
			cancel()
			if err == nil {
				return // the controller's watch on the resignations fires
			}
			rp.mu.Lock()
			still := rp.r.Resigned() && rp.r.Epoch() == epoch
			rp.mu.Unlock()
			if !still {
				return
			}
			n.logger.Warn("resignation not written; will retry", "partition", logs.DirName(rp.Topic, rp.Index),
				"err", err, "in", loopRetry)
			select {
			case <-time.After(loopRetry):
			case <-n.ctx.Done():
				return
			}
		}
	}()
}

// withdrawResignations removes this broker's resignations that im shows
// stale: the partition's state moved to another epoch, or this broker is
// out of its ISR (the controller took it out, or the topic is gone).
func (n *Node) withdrawResignations(im *meta.Image) {
	for _, r := range im.Resigned {
		if r.Broker != n.cfg.NodeID {
			continue
		}
		if t := im.Topics[r.Topic]; t != nil && int(r.Partition) < len(t.States) {
			if st := t.States[r.Partition]; st != nil && st.LeaderEpoch == r.LeaderEpoch && slices.Contains(st.ISR, r.Broker) {
				continue // not answered yet
			}
		}
		if _, busy := n.withdrawing.LoadOrStore(r, true); busy {
			continue
		}
		go func() {
			defer n.withdrawing.Delete(r)
			ctx, cancel := context.WithTimeout(n.ctx, storeTimeout)
			defer cancel()
			if err := layout.WithdrawResignation(ctx, n.store, r); err != nil {
				n.logger.Warn("stale resignation not withdrawn", "resignation", r, "err", err)
			}
		}()
	}
}

// cut executes a truncation or reset the replica asked for. A failed log
// that may recover (it is not held: out of the ISR) recovers first once its
// backoff has passed; if the cut still fails, the replica asks the leader
// again where its epoch ends, after replicaFetchBackoff, instead of
// fetching onto a log it could not cut. mu held.
func (rp *replicated) cut(what string, to int64, do func(int64) error) {
	n, name, l := rp.n, logs.DirName(rp.Topic, rp.Index), rp.Log()
	if l.Err() != nil && !l.RecoveryHeld() && l.RecoveryDue() {
		rp.recoverLocked()
	}
	if err := do(to); err != nil {
		n.logger.Error("cannot "+what+" the log; asking the leader again later", "partition", name, "to", to, "err", err)
		rp.queryNotBefore = time.Now().Add(replicaFetchBackoff)
		rp.r.TruncateFailed()
		return
	}
	n.logger.Info(what, "partition", name, "to", to)
	rp.r.Truncated(l.EndOffset())
}

// proposeISR writes an ISR change the replica proposes, on a goroutine of
// its own (a store round trip must not hold the partition): success comes
// back through the watch on the state record; a failure drops the proposal,
// and a conflict has the loop read the record again.
func (n *Node) proposeISR(rp *replicated, p replica.Proposal) {
	n.logger.Info("proposing an ISR change", "partition", logs.DirName(rp.Topic, rp.Index), "isr", p.State.ISR,
		"version", p.Version)
	grew := len(p.State.ISR) > len(rp.r.ISR()) // mu held
	go func() {
		ctx, cancel := context.WithTimeout(n.ctx, storeTimeout)
		defer cancel()
		_, err := layout.WriteISR(ctx, n.store, rp.Topic, rp.Index, p.State, p.Version)
		if err == nil {
			if grew {
				n.replCounters.expands.Inc()
			} else {
				n.replCounters.shrinks.Inc()
			}
			return
		}
		n.logger.Warn("ISR change not written", "partition", logs.DirName(rp.Topic, rp.Index), "err", err)
		rp.mu.Lock()
		if cur, ok := rp.r.Pending(); ok && cur.Version == p.Version {
			rp.r.ProposalFailed()
		}
		rp.mu.Unlock()
		if errors.Is(err, coord.ErrBadVersion) && n.loop != nil {
			n.loop.rereadTopic(rp.Topic)
		}
	}()
}

// syncReplicas gives every local partition its record from im. The loop
// calls it after reconcile and before publishing im, so that a client told
// this broker leads finds it leading.
func (n *Node) syncReplicas(im *meta.Image) {
	n.withdrawResignations(im)
	now := n.cfg.Clock.Now()
	n.localMu.RLock()
	defer n.localMu.RUnlock()
	for name, lt := range n.local {
		t := im.Topics[name]
		if t == nil || t.ID != lt.id {
			continue
		}
		for p, rp := range lt.parts {
			if int(p) >= len(t.Assignment) {
				continue
			}
			var st *meta.PartitionState
			if int(p) < len(t.States) && t.States[p] != nil {
				s := t.States[p].Clone()
				if s.Leader != meta.NoLeader && !im.Live(s.Leader) {
					s.Leader = meta.NoLeader // dead: no one to follow until the controller elects
				}
				st = &s
			}
			rp.setState(now, t.Assignment[p], st, barred(im, t.Assignment[p]))
		}
	}
}

// barred lists the replicas that may not join an ISR under im: not
// registered, or in controlled shutdown (replica.SetBarred).
func barred(im *meta.Image, replicas []int32) []int32 {
	var out []int32
	for _, r := range replicas {
		if !im.Live(r) || slices.Contains(im.ShuttingDown, r) {
			out = append(out, r)
		}
	}
	return out
}

// tickReplicas is the ISR expiration pass (Kafka's isr-expiration task,
// every replica.lag.time.max.ms / 2).
func (n *Node) tickReplicas() error {
	now := n.cfg.Clock.Now()
	for _, rp := range n.localPartitions() {
		rp.logFailed() // a failure no request met yet (a flush on a timer)
		if rp.leading.Load() {
			rp.tick(now)
		}
	}
	return nil
}

// waitAcksAll waits until an acks=all produce whose records end before next
// is replicated to the ISR, or ctx ends (REQUEST_TIMED_OUT).
func (rp *replicated) waitAcksAll(ctx context.Context, next int64, minInsync int32) error {
	for {
		ch := rp.hwChanged()
		rp.mu.Lock()
		done, err := rp.r.AcksAll(next, int(minInsync))
		rp.mu.Unlock()
		if done {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the in-sync replicas of %s: %w", logs.DirName(rp.Topic, rp.Index), ctx.Err())
		}
	}
}

// checkAppend is the acks=all check before an append.
func (rp *replicated) checkAppend(minInsync int32) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.r.CheckAppend(int(minInsync))
}

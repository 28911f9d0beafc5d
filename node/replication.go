package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/replica"
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
	hwMu    sync.Mutex
	hwCh    chan struct{} // closed and replaced when hw moves

	appends appendGate // produce appends in progress (appendgate.go)
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
	rp.n.hwCheckpoint.dirty()
}

// wakeAll closes the high-watermark channel without a move: waiters look
// again (a role change, a close).
func (rp *replicated) wakeAll() {
	rp.hwMu.Lock()
	close(rp.hwCh)
	rp.hwCh = make(chan struct{})
	rp.hwMu.Unlock()
}

// setState applies the partition's record as the image has it.
func (rp *replicated) setState(now time.Time, replicas []int32, st *meta.PartitionState) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	was := rp.r.Role()
	rp.r.SetState(now, replicas, st, rp.Log().EndOffset())
	rp.applyLocked()
	role := rp.r.Role()
	rp.leading.Store(role == replica.Leader)
	if role == replica.None {
		rp.epoch.Store(-1)
	} else {
		rp.epoch.Store(rp.r.Epoch())
	}
	if role != was {
		rp.n.logger.Info("replica role", "partition", logs.DirName(rp.Topic, rp.Index), "role", role.String(),
			"leader", rp.r.Leader(), "epoch", rp.r.Epoch(), "log_end", rp.r.LogEnd(), "high_watermark", rp.r.HighWatermark())
		rp.wakeAll()
	}
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
		if err := rp.Log().Truncate(*rd.Truncate); err != nil {
			n.logger.Error("cannot truncate", "partition", name, "to", *rd.Truncate, "err", err)
		} else {
			n.logger.Info("truncated", "partition", name, "to", *rd.Truncate)
		}
		rp.r.Truncated(rp.Log().EndOffset())
	}
	if rd.Reset != nil {
		if err := rp.Log().Reset(*rd.Reset); err != nil {
			n.logger.Error("cannot reset the log", "partition", name, "at", *rd.Reset, "err", err)
		} else {
			n.logger.Info("log reset", "partition", name, "at", *rd.Reset)
		}
		rp.r.Truncated(rp.Log().EndOffset())
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
}

// proposeISR writes an ISR change the replica proposes, on a goroutine of
// its own (a store round trip must not hold the partition): success comes
// back through the watch on the state record; a failure drops the proposal,
// and a conflict has the loop read the record again.
func (n *Node) proposeISR(rp *replicated, p replica.Proposal) {
	n.logger.Info("proposing an ISR change", "partition", logs.DirName(rp.Topic, rp.Index), "isr", p.State.ISR,
		"version", p.Version)
	go func() {
		ctx, cancel := context.WithTimeout(n.ctx, storeTimeout)
		defer cancel()
		_, err := layout.WriteISR(ctx, n.store, rp.Topic, rp.Index, p.State, p.Version)
		if err == nil {
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
			rp.setState(now, t.Assignment[p], st)
		}
	}
}

// tickReplicas is the ISR expiration pass (Kafka's isr-expiration task,
// every replica.lag.time.max.ms / 2).
func (n *Node) tickReplicas() error {
	now := n.cfg.Clock.Now()
	for _, rp := range n.localPartitions() {
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

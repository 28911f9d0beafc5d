package node

// The admin requests on partitions and records: CreatePartitions,
// DeleteRecords, OffsetDelete, DescribeProducers and DescribeLogDirs (see
// the package doc, "Admin").

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/weir-broker/weir/core/controller"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
)

var (
	// ErrPolicyViolation: a request the topic's configs forbid (records
	// deleted from a topic that is only compacted).
	ErrPolicyViolation = errors.New("node: policy violation")
	// ErrOffsetOutOfRange: DeleteRecords past the high watermark.
	ErrOffsetOutOfRange = partlog.ErrOffsetOutOfRange
)

// CreatePartitions asks for more partitions, as CreatePartitions does.
type CreatePartitions struct {
	Topic string
	// Count is the new partition count: more than the topic has.
	Count int32
	// Assignment, when not nil, names the replicas of each new partition,
	// in order (Count minus the current count of them); nil: the
	// controller's rules (controller.AssignAdded).
	Assignment [][]int32
	// ValidateOnly checks everything and changes nothing.
	ValidateOnly bool
	// NoWait returns once the assignment is written, without waiting for
	// the new partitions' leaders (timeout_ms <= 0).
	NoWait bool
}

// CreatePartitions adds partitions to a topic: any broker may, as in
// Kafka's ZooKeeper mode. It places the new partitions' replicas
// (controller.AssignAdded: Kafka's rules, or the request's assignment,
// checked), writes the topic's assignment node with them (a compare-and-set
// on the version read: a concurrent change is decided again), and waits
// (within ctx and createWait) until every new partition has a leader and,
// where this broker leads one, its log is open. The controller writes
// their first states and the brokers assigned them open their logs, as for
// a new topic; producers see the new count at their next Metadata refresh.
//
// Errors: ErrUnknownTopic; ErrInvalidTopic for the internal topic (its
// partition count decides which broker coordinates each group);
// ErrInvalidPartitions (not above the current count, or over
// MaxPartitions); ErrInvalidReplicaAssignment; ErrInvalidReplicationFactor;
// and context.DeadlineExceeded wrapped when the partitions were added but
// not all their leaders elected in time (Kafka answers REQUEST_TIMED_OUT).
func (n *Node) CreatePartitions(ctx context.Context, req CreatePartitions) (TopicInfo, error) {
	for {
		im, _ := n.image.load()
		t := im.Topics[req.Topic]
		switch {
		case t == nil || t.Deleting:
			return TopicInfo{}, unknownTopic(req.Topic)
		case req.Topic == OffsetsTopic || req.Topic == TransactionStateTopic:
			return TopicInfo{}, fmt.Errorf("%w: %s is internal: its partition count places the groups or transactional ids", ErrInvalidTopic, req.Topic)
		case req.Count > MaxPartitions:
			return TopicInfo{}, fmt.Errorf("%w: %d for topic %q, want at most %d", ErrInvalidPartitions, req.Count, req.Topic, MaxPartitions)
		}
		live := make([]int32, 0, len(im.Brokers))
		for _, b := range im.SortedBrokers() {
			live = append(live, b.ID)
		}
		added, err := controller.AssignAdded(live, t.Assignment, req.Count, req.Assignment)
		switch {
		case errors.Is(err, controller.ErrInvalidPartitions):
			return TopicInfo{}, fmt.Errorf("%w: topic %q: %w", ErrInvalidPartitions, req.Topic, err)
		case errors.Is(err, controller.ErrInvalidReplicaAssignment):
			return TopicInfo{}, fmt.Errorf("%w: topic %q: %w", ErrInvalidReplicaAssignment, req.Topic, err)
		case errors.Is(err, controller.ErrInvalidReplicationFactor):
			return TopicInfo{}, fmt.Errorf("%w: topic %q: %w", ErrInvalidReplicationFactor, req.Topic, err)
		case err != nil:
			return TopicInfo{}, err
		}
		if req.ValidateOnly {
			nt := t.Clone()
			nt.Assignment = append(nt.Assignment, added...)
			nt.States = append(nt.States, make([]*meta.PartitionState, len(added))...)
			return n.topicInfo(im, nt), nil
		}
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err = layout.AddPartitions(sctx, n.store, t.Name, t.ID, len(t.Assignment), added)
		cancel()
		if errors.Is(err, layout.ErrPartitionsChanged) {
			// Another broker added partitions (or the topic was replaced)
			// since this image: wait for an image that shows it, decide
			// again.
			if _, werr := n.image.waitFor(ctx, func(nim *meta.Image) bool { return nim != im }); werr != nil {
				return TopicInfo{}, fmt.Errorf("node: create partitions of %q: %w", req.Topic, errors.Join(err, werr))
			}
			continue
		}
		if errors.Is(err, layout.ErrInvalid) {
			return TopicInfo{}, fmt.Errorf("%w: %w", ErrInvalidReplicaAssignment, err)
		}
		if err != nil {
			return TopicInfo{}, fmt.Errorf("node: create partitions of %q: %w", req.Topic, err)
		}
		n.logger.Info("added partitions", "topic", t.Name, "from", len(t.Assignment), "to", req.Count)
		if req.NoWait {
			return n.Topic(req.Topic)
		}
		return n.waitPartitions(ctx, req.Topic, t.ID, int(req.Count))
	}
}

// waitPartitions waits until the topic (incarnation id) has count
// partitions in the image, each with a leader (and those led here open),
// and returns it; when ctx (or createWait) ends first, the topic as it is
// and an error wrapping context.DeadlineExceeded.
func (n *Node) waitPartitions(ctx context.Context, name string, id [16]byte, count int) (TopicInfo, error) {
	wctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	im, err := n.image.waitFor(wctx, func(im *meta.Image) bool {
		t := im.Topics[name]
		if t == nil || t.ID != id || t.Deleting {
			return true // gone: answered below
		}
		if len(t.Assignment) < count {
			return false
		}
		return n.leadersReady(im, t)
	})
	t := im.Topics[name]
	switch {
	case t == nil || t.ID != id || t.Deleting:
		return TopicInfo{}, unknownTopic(name)
	case err != nil:
		return n.topicInfo(im, t), fmt.Errorf("node: partitions of %q added, but not every one has a leader yet: %w",
			name, context.DeadlineExceeded)
	}
	return n.topicInfo(im, t), nil
}

// DeleteRecordsLatest as DeleteRecords' offset is the high watermark.
const DeleteRecordsLatest = -1

// DeleteRecords moves the log start offset of a partition this broker
// leads up to offset (DeleteRecordsLatest: the high watermark), as Kafka's
// DeleteRecords: records below it are no longer served (fetches below get
// OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it), the segments wholly
// below it go, and the new start is checkpointed in the partition directory
// (partlog.DeleteRecordsBefore). Followers learn the leader's log start from
// its fetch answers, move theirs (followLogStartLocked) and report it in
// their next fetch; like Kafka's DelayedDeleteRecords, DeleteRecords then
// waits, within ctx, until every live replica's log start reached offset,
// and returns the low watermark: the smallest log start of the live
// replicas. When ctx ends first, it returns the low watermark as it is and
// an error wrapping context.DeadlineExceeded (REQUEST_TIMED_OUT; the
// leader's start has moved, the followers' follow).
//
// Errors: those of Partition (unknown, not leader); ErrOffsetOutOfRange for
// an offset past the high watermark or below -1; ErrInvalidTopic for the
// internal topic; ErrPolicyViolation for a topic whose cleanup.policy is
// compact without delete (Kafka's rule).
func (n *Node) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if topic == OffsetsTopic || topic == TransactionStateTopic {
		return -1, fmt.Errorf("%w: cannot delete records of the internal topic %s", ErrInvalidTopic, topic)
	}
	p, _, err := n.leaderPartition(topic, partition)
	if err != nil {
		return -1, err
	}
	if ti, err := n.Topic(topic); err == nil {
		if pol := ti.Configs[topicconfig.CleanupPolicy]; pol != "" && !strings.Contains(pol, topicconfig.CleanupDelete) {
			return -1, fmt.Errorf("%w: %s has cleanup.policy=%s: its records go by compaction only",
				ErrPolicyViolation, logs.DirName(topic, partition), pol)
		}
	}
	hw := p.highWatermark()
	if offset == DeleteRecordsLatest {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: delete records of %s before %d: the high watermark is %d",
			ErrOffsetOutOfRange, logs.DirName(topic, partition), offset, hw)
	}
	start, err := p.Log().DeleteRecordsBefore(offset)
	if err != nil {
		return -1, fmt.Errorf("node: delete records of %s before %d: %w", logs.DirName(topic, partition), offset, err)
	}
	n.logger.Info("deleted records", "partition", logs.DirName(topic, partition), "before", offset, "log_start", start)
	for {
		low, reported, imChanged := n.lowWatermark(p, topic, partition, start)
		if low >= offset {
			return low, nil
		}
		select {
		case <-reported:
		case <-imChanged:
		case <-ctx.Done():
			return low, fmt.Errorf("node: records of %s deleted before %d on the leader, the replicas' low watermark is %d: %w",
				logs.DirName(topic, partition), offset, low, context.DeadlineExceeded)
		}
	}
}

// lowWatermark is the smallest log start over the partition's live
// replicas (Kafka's lowWatermarkIfLeader), this broker's being start; a
// live follower that has not reported one counts as 0. reported is closed
// when a follower next reports a new one, imChanged when the image changes
// (a replica dies).
func (n *Node) lowWatermark(p *replicated, topic string, partition int32, start int64) (low int64, reported, imChanged <-chan struct{}) {
	im, imChanged := n.image.load()
	p.starts.mu.Lock()
	defer p.starts.mu.Unlock()
	if p.starts.changed == nil {
		p.starts.changed = make(chan struct{})
	}
	low = start
	if t := im.Topics[topic]; t != nil && int(partition) < len(t.Assignment) {
		for _, r := range t.Assignment[partition] {
			if r != n.cfg.NodeID && im.Live(r) {
				low = min(low, max(0, p.starts.by[r]))
			}
		}
	}
	return low, p.starts.changed, imChanged
}

// followerStarts are the log start offsets a leader's followers report in
// their fetches, by broker.
type followerStarts struct {
	mu      sync.Mutex
	by      map[int32]int64
	changed chan struct{} // closed (and replaced) when one moves
}

// FollowerLogStart records the log start a follower (broker replicaID)
// reported in its fetch (the fetch request's log_start_offset; -1: none),
// for DeleteRecords' low watermark.
func (p *Partition) FollowerLogStart(replicaID int32, start int64) {
	s := &p.p.starts
	s.mu.Lock()
	defer s.mu.Unlock()
	if start < 0 || s.by[replicaID] == start {
		return
	}
	if s.by == nil {
		s.by = map[int32]int64{}
	}
	s.by[replicaID] = start
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// followLogStart moves a follower's log start up to the leader's
// (leaderStart, from a fetch answer), bounded by the follower's high
// watermark and log end (Kafka's maybeIncrementLogStartOffset with
// LeaderOffsetIncremented). A failure is logged: the next answer tries
// again. mu held.
func (rp *replicated) followLogStartLocked(leaderStart int64) {
	l := rp.Log()
	target := min(leaderStart, rp.r.HighWatermark(), l.EndOffset())
	if target <= l.StartOffset() {
		return
	}
	if _, err := l.DeleteRecordsBefore(target); err != nil {
		rp.n.logger.Warn("moving a follower's log start to the leader's", "partition", logs.DirName(rp.Topic, rp.Index),
			"leader_log_start", leaderStart, "err", err)
	}
}

// DescribeProducers lists the idempotent producers a partition this broker
// leads knows (DescribeProducers); errors as Partition's.
func (n *Node) DescribeProducers(topic string, partition int32) ([]producers.Info, error) {
	p, _, err := n.leaderPartition(topic, partition)
	if err != nil {
		return nil, err
	}
	return p.Producers(), nil
}

// LogDir is the one log directory of this broker (DescribeLogDirs).
type LogDir struct {
	Path string
	// Total and Usable are the bytes of the file system holding it (-1
	// when unknown: a file system that is not the operating system's).
	Total, Usable int64
	Partitions    []LogDirPartition
}

// LogDirPartition is one partition log in the directory.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Size      int64 // bytes of its segments
}

// LogDir describes the broker's log directory: every partition log open
// here (leader or follower), with its size, sorted by topic and partition.
func (n *Node) LogDir() LogDir {
	d := LogDir{Path: n.cfg.DataDir, Total: -1, Usable: -1}
	for _, rp := range n.localPartitions() {
		d.Partitions = append(d.Partitions, LogDirPartition{Topic: rp.Topic, Partition: rp.Index, Size: rp.Log().Size()})
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.cfg.DataDir, &st); err == nil {
		d.Total, d.Usable = int64(st.Blocks)*int64(st.Bsize), int64(st.Bavail)*int64(st.Bsize)
	}
	return d
}

// DeleteOffsets deletes a group's committed offsets (OffsetDelete) on the
// group's coordinator: see groups.Coordinator.DeleteOffsets. A partition
// of a topic that does not exist gets ErrUnknownTopic or
// ErrUnknownPartition in perPartition, as Kafka's.
func (n *Node) DeleteOffsets(group string, parts []groups.TopicPartition) ([]error, error) {
	c, err := n.GroupCoordinator(group)
	if err != nil {
		return nil, err
	}
	perPartition := make([]error, len(parts))
	var known []groups.TopicPartition
	var at []int
	for i, tp := range parts {
		if err := n.HasPartition(tp.Topic, tp.Partition); err != nil {
			perPartition[i] = err
			continue
		}
		known, at = append(known, tp), append(at, i)
	}
	res, err := c.DeleteOffsets(group, known)
	if err != nil {
		return nil, err
	}
	for j, e := range res {
		perPartition[at[j]] = e
	}
	return perPartition, nil
}

// maxTimestamp answers ListOffsets' max-timestamp query (KIP-734): the
// offset and timestamp of the first record holding the largest timestamp
// below the high watermark; (-1, -1) for an empty log. Within an
// uncompressed batch the record is found exactly; in a compressed one the
// answer is the batch's last offset (Kafka before 3.8 answered so for
// every batch).
func (p *Partition) maxTimestamp() (offset, timestamp int64, err error) {
	l := p.p.Log()
	h, ok, err := l.MaxTimestamp()
	if err != nil || !ok || h.BaseOffset >= p.HighWatermark() {
		return -1, -1, err
	}
	offset, timestamp = h.LastOffset(), h.MaxTimestamp
	if h.Codec() != record.CodecNone || h.TimestampType() != record.CreateTime {
		return offset, timestamp, nil
	}
	sl, err := l.Read(h.BaseOffset, int64(h.Size()), partlog.NoLimit)
	if err != nil {
		return offset, timestamp, nil
	}
	defer sl.Release()
	b, err := sl.Bytes()
	if err != nil || len(b) < h.Size() {
		return offset, timestamp, nil
	}
	recs, err := record.Records(b[:h.Size()], nil)
	if err != nil {
		return offset, timestamp, nil
	}
	for _, r := range recs {
		if r.Timestamp == h.MaxTimestamp {
			return h.BaseOffset + int64(r.OffsetDelta), timestamp, nil
		}
	}
	return offset, timestamp, nil
}

package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/txn"
)

// The transaction coordinator's wiring (helper txncoord). TransactionStateTopic
// is Kafka's transaction log: a transactional id's coordinator is the leader
// of its partition javaAbs(javaHash(id)) % 50 (Kafka's
// TransactionStateManager.partitionFor), so every broker answers
// FindCoordinator(type 1) alike. The topic is created, as an internal topic,
// on the first FindCoordinator for a transactional id or transactional
// InitProducerId, with Kafka's transaction.state.log.* defaults: 50
// partitions, min(3, live brokers) replicas (Config.OffsetsReplicationFactor
// is shared with __consumer_offsets), compacted, min.insync.replicas 2 capped
// at the replication factor, 100 MiB segments. The leader of each partition
// loads it into the coordinator (syncTxnCoordinator, from the loop, with the
// partition's leader epoch as the coordinator epoch the markers carry) and
// unloads it when it stops leading; the coordinator's records are appended
// with acks=all (offsetsLog). core/txn has the state machine.

// DefaultTransactionPartitions is the partition count of
// TransactionStateTopic (Kafka's transaction.state.log.num.partitions).
const DefaultTransactionPartitions = 50

// Transaction defaults (Kafka's broker defaults).
const (
	DefaultTransactionMaxTimeout     = txn.DefaultMaxTimeout // transaction.max.timeout.ms
	DefaultTransactionalIDExpiration = txn.DefaultExpiration // transactional.id.expiration.ms
)

// txnDefaults fills the transaction settings of Config (called by
// Validate).
func (c *Config) txnDefaults() error {
	if c.TransactionMaxTimeout == 0 {
		c.TransactionMaxTimeout = DefaultTransactionMaxTimeout
	}
	if c.TransactionMaxTimeout < time.Millisecond {
		return fmt.Errorf("%w: TransactionMaxTimeout %v is below 1ms", ErrInvalidConfig, c.TransactionMaxTimeout)
	}
	if c.TransactionalIDExpiration == 0 {
		c.TransactionalIDExpiration = DefaultTransactionalIDExpiration
	}
	return nil
}

// openTxn makes the transaction coordinator (called by open).
func (n *Node) openTxn() error {
	var err error
	n.txn, err = txn.New(txn.Options{
		PartitionFor: n.txnPartitionFor,
		ProducerIDs:  n.newProducerID,
		WriteMarkers: n.coordinatorMarkers,
		Clock:        n.cfg.Clock,
		Logger:       n.logger.With("component", "txn"),
		MaxTimeout:   n.cfg.TransactionMaxTimeout,
		Expiration:   n.cfg.TransactionalIDExpiration,
	})
	if err != nil {
		return fmt.Errorf("node: transaction coordinator: %w", err)
	}
	return nil
}

// closeTxn closes the coordinator and waits for its loads.
func (n *Node) closeTxn() error {
	if n.txn == nil {
		return nil
	}
	err := n.txn.Close()
	n.txnLoads.replays.Wait()
	n.txnPeers.close()
	return err
}

// newProducerID hands out a producer id for a transactional id, from the
// same blocks as idempotent producers'.
func (n *Node) newProducerID() (int64, error) {
	ctx, cancel := context.WithTimeout(n.ctx, storeTimeout)
	defer cancel()
	id, _, err := n.InitProducerID(ctx)
	return id, err
}

// txnMarkerTimeout bounds one write of a transaction's markers (the
// requests to the other leaders, the waits for the in-sync replicas): the
// partitions not done by then fail, and the coordinator writes them again
// after its backoff. Kafka's marker channel times its requests out after
// request.timeout.ms, 30 s. A variable for the tests.
var txnMarkerTimeout = 30 * time.Second

// coordinatorMarkers is the coordinator's MarkerWriter: writeTxnMarkers, a
// partition that no longer exists counting as done (its topic was deleted:
// there is nothing left to mark). Only an image that has
// TransactionStateTopic tells which topics exist: the coordinator's
// partitions come from such an image, and one without it (the empty image a
// restarted node starts from, until its loop publishes the first) has none
// of the transaction's topics either; against it every marker fails,
// retriably, rather than count as done.
func (n *Node) coordinatorMarkers(ctx context.Context, m txn.Marker, parts []txn.TopicPartition) []error {
	// writeTxnMarkers waits as long as ctx lets it, and the coordinator's
	// has no deadline: a leader that never answers would hold the
	// transaction's markers, never retried, for good.
	ctx, cancel := context.WithTimeout(ctx, txnMarkerTimeout)
	defer cancel()
	if im, _ := n.image.load(); im.Topics[TransactionStateTopic] == nil {
		errs := make([]error, len(parts))
		for i := range errs {
			errs[i] = fmt.Errorf("%w: the picture of the cluster this broker answers from predates %s",
				ErrLeaderNotAvailable, TransactionStateTopic)
		}
		return errs
	}
	tps := make([]TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	errs := n.writeTxnMarkers(ctx, logs.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, tps)
	for i, err := range errs {
		if errors.Is(err, ErrUnknownTopic) || errors.Is(err, ErrUnknownPartition) {
			if n.HasPartition(parts[i].Topic, parts[i].Partition) != nil {
				errs[i] = nil
			}
		}
	}
	return errs
}

// txnPartitionFor is the partition of TransactionStateTopic that holds id.
func (n *Node) txnPartitionFor(id string) int32 {
	parts := int32(DefaultTransactionPartitions)
	if im, _ := n.image.load(); im != nil {
		if t := im.Topics[TransactionStateTopic]; t != nil && len(t.Assignment) > 0 {
			parts = int32(len(t.Assignment))
		}
	}
	return javaAbs(javaHash(id)) % parts
}

// txnTopicConfigs are the configs TransactionStateTopic is created with.
// Its acks wait for the disk (weir.durable.acks): a coordinator that
// forgot a PrepareCommit after some of its markers landed would abort the
// rest, leaving the transaction half visible, and on one node nothing but
// the fsync keeps it (TestTransactionCrash's power cuts). The records are
// few and small (three per transaction, of which the coordinator waits for
// two: it applies a Complete state once appended, see core/txn), concurrent
// ones share an fsync, and the coordinator waits for it without its lock
// (offsetsLog.Append).
func (n *Node) txnTopicConfigs(rf int16) map[string]string {
	return map[string]string{
		topicconfig.DurableAcks:       "true",
		topicconfig.CleanupPolicy:     topicconfig.CleanupCompact,
		topicconfig.SegmentBytes:      strconv.FormatInt(n.cfg.OffsetsSegmentBytes, 10),
		topicconfig.MinInsyncReplicas: strconv.Itoa(int(min(rf, 2))),
	}
}

// ensureTxnTopic creates TransactionStateTopic when it does not exist and
// waits for its leaders.
func (n *Node) ensureTxnTopic(ctx context.Context) (TopicInfo, error) {
	im, _ := n.image.load()
	rf := max(int16(min(n.cfg.OffsetsReplicationFactor, int16(len(im.Brokers)))), 1)
	ti, err := n.CreateTopic(ctx, CreateTopic{Name: TransactionStateTopic, Partitions: DefaultTransactionPartitions,
		ReplicationFactor: rf, Configs: n.txnTopicConfigs(rf), internal: true})
	if errors.Is(err, ErrTopicExists) {
		return settled(n.waitReady(ctx, TransactionStateTopic))
	}
	return settled(ti, err)
}

// txnCoordinatorOf returns the leader of id's partition of
// TransactionStateTopic, creating the topic first when create is set.
func (n *Node) txnCoordinatorOf(ctx context.Context, id string, create bool) (Broker, error) {
	im, _ := n.image.load()
	t := im.Topics[TransactionStateTopic]
	if t == nil && create {
		if _, err := n.ensureTxnTopic(ctx); err != nil {
			return Broker{ID: -1}, fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
		}
		im, _ = n.image.load()
		t = im.Topics[TransactionStateTopic]
	}
	if t == nil || len(t.Assignment) == 0 {
		return Broker{ID: -1}, fmt.Errorf("%w: %s does not exist yet", ErrCoordinatorNotAvailable, TransactionStateTopic)
	}
	p := int(javaAbs(javaHash(id)) % int32(len(t.Assignment)))
	v := im.View(t, p)
	b, ok := im.Brokers[v.Leader]
	if !ok {
		return Broker{ID: -1}, fmt.Errorf("%w: %s-%d has no leader", ErrCoordinatorNotAvailable, TransactionStateTopic, p)
	}
	return brokerOf(b), nil
}

// TxnCoordinator returns the transaction coordinator when this broker
// coordinates id: ErrNotCoordinator when another broker does,
// ErrCoordinatorNotAvailable when none does yet (creating the topic when
// there is none).
func (n *Node) TxnCoordinator(ctx context.Context, id string) (*txn.Coordinator, error) {
	b, err := n.txnCoordinatorOf(ctx, id, true)
	if err != nil {
		return nil, err
	}
	if b.ID != n.cfg.NodeID {
		return nil, fmt.Errorf("%w: transactional id %q is coordinated by broker %d", ErrNotCoordinator, id, b.ID)
	}
	return n.txn, nil
}

// txnLoads are the partitions of TransactionStateTopic handed to the
// coordinator, with the leader epoch they were loaded at.
type txnLoads struct {
	mu      sync.Mutex
	parts   map[int32]txnLoad
	fails   map[int32]int // failed loads in a row, for the retry's backoff
	replays sync.WaitGroup
}

// txnLoadRetry is how soon a failed load of a partition of
// TransactionStateTopic is tried again: loopRetry, doubled with each
// failure in a row up to txnLoadRetryMax. Its transactional ids get
// NOT_COORDINATOR meanwhile.
func txnLoadRetry(fails int) time.Duration {
	return min(loopRetry<<min(fails-1, 16), txnLoadRetryMax)
}

const txnLoadRetryMax = 30 * time.Second

type txnLoad struct {
	part  *replicated
	epoch int32
}

// syncTxnCoordinator hands the transaction coordinator the partitions of
// TransactionStateTopic im names this broker leader of, and takes back those
// it no longer leads (a new leader epoch reloads: the markers carry it).
// Called by the loop before it publishes im, as syncCoordinator. The
// replays start once im (or a later image) is published: a replay resumes
// the markers of the transactions it finds prepared, and the marker writer
// looks their partitions up in the published image, where the one before
// im (at a restart the empty one) has no such topic: it would take the
// markers for a deleted topic's, done, and complete the transaction with
// its partitions' last stable offsets stuck (TestTransactionCrash).
func (n *Node) syncTxnCoordinator(ctx context.Context, im *meta.Image) {
	if n.txn == nil {
		return
	}
	_, published := n.image.load() // closed when the loop publishes im
	self := n.cfg.NodeID
	want := map[int32]txnLoad{}
	if t := im.Topics[TransactionStateTopic]; t != nil && !t.Deleting {
		for _, p := range assignedHere(t, self) {
			v := im.View(t, int(p))
			if v.Leader != self {
				continue
			}
			if part, ok := n.localPartition(TransactionStateTopic, t.ID, p); ok && part.leading.Load() {
				want[p] = txnLoad{part: part, epoch: v.LeaderEpoch}
			}
		}
	}
	o := &n.txnLoads
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts == nil {
		o.parts = map[int32]txnLoad{}
	}
	for p, l := range o.parts {
		if want[p] != l {
			n.txn.Unload(p)
			delete(o.parts, p)
		}
	}
	for p, l := range want {
		if o.parts[p] == l {
			continue
		}
		o.parts[p] = l
		replay := n.txn.StartLoad(p, offsetsLog{l.part}, l.epoch)
		o.replays.Add(1)
		go func() {
			defer o.replays.Done()
			select {
			case <-published:
			case <-ctx.Done():
				return
			}
			err := replay(ctx)
			switch {
			case err == nil:
				o.mu.Lock()
				delete(o.fails, p)
				o.mu.Unlock()
			case errors.Is(err, txn.ErrNotCoordinator), ctx.Err() != nil:
			default:
				o.mu.Lock()
				if o.parts[p] != l {
					o.mu.Unlock()
					return
				}
				// Taken back, and tried again soon: not only at the
				// loop's next step, which may be far off (nothing
				// changed in the cluster).
				delete(o.parts, p)
				if o.fails == nil {
					o.fails = map[int32]int{}
				}
				o.fails[p]++
				wait := txnLoadRetry(o.fails[p])
				o.mu.Unlock()
				n.logger.Error("cannot load the transaction log", "partition", logs.DirName(TransactionStateTopic, p), "err", err, "retry", wait)
				select {
				case <-time.After(wait):
					if n.loop != nil {
						n.loop.wake()
					}
				case <-ctx.Done():
				}
			}
		}()
	}
}

// AwaitTxnLoaded waits until every partition of TransactionStateTopic this
// broker leads is loaded (creating the topic first), or ctx ends. For tools
// and tests; clients retry COORDINATOR_LOAD_IN_PROGRESS.
func (n *Node) AwaitTxnLoaded(ctx context.Context) error {
	if _, err := n.ensureTxnTopic(ctx); err != nil {
		return err
	}
	for {
		im, _ := n.image.load()
		t := im.Topics[TransactionStateTopic]
		done := t != nil
		if t != nil {
			for p := range t.Assignment {
				if im.View(t, p).Leader == n.cfg.NodeID && !n.txn.Loaded(int32(p)) {
					done = false
					break
				}
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: waiting for the transaction log to load: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

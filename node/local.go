package node

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/topicconfig"
)

// localTopic is a topic this broker holds replicas of: the partition logs it
// opened, for the topic id it opened them for.
type localTopic struct {
	id    [16]byte
	pc    logs.PartitionConfig // what the topic's effective configs mean to its logs (a recompressor shared by its partitions)
	eff   map[string]string    // the effective configs pc was made of
	parts map[int32]*replicated

	// checked and checkedDefaults are what reconfigureLocal last compared
	// (topics are replaced when read again, never changed): unchanged, it
	// has nothing to do.
	checked         *meta.Topic
	checkedDefaults map[string]string
	// retired are recompressors replaced by a config change: appends in
	// progress may still use them, so they are closed with the topic.
	retired []*recompress.Recompressor
}

// localPartition returns the open log of a partition this broker holds, for
// the topic id the image names (a log of an older topic of the same name is
// not it).
func (n *Node) localPartition(topic string, id [16]byte, p int32) (*replicated, bool) {
	n.localMu.RLock()
	defer n.localMu.RUnlock()
	lt := n.local[topic]
	if lt == nil || lt.id != id {
		return nil, false
	}
	part, ok := lt.parts[p]
	return part, ok
}

// localPartitions returns every open partition, for retention and metrics.
func (n *Node) localPartitions() []*replicated {
	n.localMu.RLock()
	defer n.localMu.RUnlock()
	var out []*replicated
	for _, name := range slices.Sorted(maps.Keys(n.local)) {
		lt := n.local[name]
		for _, i := range slices.Sorted(maps.Keys(lt.parts)) {
			out = append(out, lt.parts[i])
		}
	}
	return out
}

// reconcile makes the logs this broker has open match what im assigns to it:
// it opens the partitions assigned here, removes those of topics being deleted
// once (the explicit instruction; removed records the topic ids done; it
// returns the deleted topics assigned here, each incarnation by its id, so
// the caller can acknowledge),
// and closes the logs of topics the image no longer has (their directories
// are set aside, data kept: nothing is deleted because something is missing).
// Only the node's loop calls it.
func (n *Node) reconcile(im *meta.Image, removed map[[16]byte]bool) (deleted []*meta.Topic, err error) {
	n.noteStartPicture(im)
	var errs []error
	var opens []toOpen
	self := n.cfg.NodeID
	for _, t := range im.SortedTopics() {
		assigned := assignedHere(t, self)
		lt := n.local[t.Name]
		if lt != nil && lt.id != t.ID {
			// The name now belongs to another topic (deleted and created
			// again while this broker missed the deletion).
			errs = append(errs, n.dropLocal(t.Name, lt, false))
			lt = nil
		}
		if t.Deleting {
			if !removed[t.ID] {
				var err error
				if lt != nil {
					err = n.dropLocal(t.Name, lt, true)
				} else if len(assigned) > 0 {
					err = n.logs.Remove(t.Name, t.ID, int32(t.Partitions()))
				}
				if err != nil {
					errs = append(errs, err)
					continue // tried again next round
				}
				if err := n.groups.RemoveTopic(t.Name); err != nil {
					n.logger.Warn("dropping committed offsets of a deleted topic", "topic", t.Name, "err", err)
				}
				removed[t.ID] = true
				n.localMu.Lock()
				delete(n.openFailed, t.ID)
				n.localMu.Unlock()
			}
			if len(assigned) > 0 {
				deleted = append(deleted, t)
			}
			continue
		}
		if len(assigned) == 0 {
			continue
		}
		if lt == nil {
			pc, eff, err := n.partitionConfig(t, im)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			lt = &localTopic{id: t.ID, pc: pc, eff: eff, parts: map[int32]*replicated{}}
			n.setLocal(t.Name, lt)
		} else {
			n.reconfigureLocal(t, lt, im)
		}
		for _, p := range assigned {
			if _, ok := lt.parts[p]; !ok {
				opens = append(opens, toOpen{t: t, lt: lt, p: p})
			}
		}
	}
	errs = append(errs, n.openPartitions(opens)...)
	for _, name := range slices.Sorted(maps.Keys(n.local)) {
		if _, ok := im.Topics[name]; !ok {
			errs = append(errs, n.dropLocal(name, n.local[name], false))
		}
	}
	return deleted, errors.Join(errs...)
}

// partitionID is a partition of a topic incarnation (topic id, index).
type partitionID struct {
	topic [16]byte
	index int32
}

// toOpen is a partition reconcile opens.
type toOpen struct {
	t  *meta.Topic
	lt *localTopic
	p  int32
}

// openWorkers bounds the partitions opened at once: opening is mostly
// waiting for small reads (and, after a crash, recovery), so a few per core.
var openWorkers = max(4, 4*runtime.GOMAXPROCS(0))

// openPartitions opens the partitions in parallel (a broker starting with
// thousands of partitions, or a topic of thousands being created), then
// installs them in order. It returns what failed; those are tried again at
// the next reconcile.
func (n *Node) openPartitions(opens []toOpen) []error {
	parts := make([]*logs.Partition, len(opens))
	errs := make([]error, len(opens))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(openWorkers, len(opens)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				parts[i], errs[i] = n.openPartition(opens[i])
			}
		}()
	}
	for i := range opens {
		next <- i
	}
	close(next)
	wg.Wait()
	var failed []error
	unclean := 0
	n.localMu.Lock()
	for i, o := range opens {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			if n.openFailed == nil {
				n.openFailed = map[[16]byte]error{}
			}
			n.openFailed[o.t.ID] = errs[i]
			continue
		}
		delete(n.openFailed, o.t.ID)
		dir := logs.DirName(o.t.Name, o.p)
		rp := newReplicated(n, parts[i], o.t.ID, n.hwAtOpen[dir])
		id := partitionID{o.t.ID, o.p}
		if uncleanLog(parts[i], n.foundAtStart[id]) {
			rp.r.Unclean() // before its first state: no one can reach it yet
			unclean++
		}
		// Found at start-up once: a directory of this name created later
		// is a new replica (the topic deleted and created again has
		// another id; this one moved away and back).
		delete(n.foundAtStart, id)
		o.lt.parts[o.p] = rp
	}
	n.localMu.Unlock()
	if unclean > 0 {
		n.logger.Warn("partition logs back from an unclean shutdown: each resigns from an ISR that names this broker, "+
			"and leads nothing it led before, until the controller has moved it", "partitions", unclean)
	}
	if len(failed) > 0 {
		// Wake CreateTopic waiting for these partitions: it gives up on
		// the topic rather than time out.
		im, _ := n.image.load()
		n.image.publish(im)
	}
	return failed
}

// uncleanLog reports whether p's log may have lost records this broker
// had (replica.Unclean): it was not closed cleanly, or its directory was
// missing when the broker started (a lost disk, or a power cut that took
// the directory's entry; atStart: the partition was assigned here in the
// broker's first picture of the cluster, see noteStartPicture). A
// directory created for any other partition is a new replica (a topic
// created since, even while the broker was still starting, or partitions
// assigned here since), which no ISR counts on for anything yet.
func uncleanLog(p *logs.Partition, atStart bool) bool {
	switch p.OpenedAs() {
	case logs.OpenedUnclean:
		return true
	case logs.OpenedNew:
		return atStart
	}
	return false
}

// noteStartPicture records, from im, the first image the loop reconciles
// (read once this broker registered), the partitions assigned here: those
// whose directory, if missing, a crash or a lost disk took (uncleanLog).
// Only the loop calls it.
func (n *Node) noteStartPicture(im *meta.Image) {
	if n.startPictured {
		return
	}
	n.startPictured = true
	n.localMu.Lock()
	defer n.localMu.Unlock()
	n.foundAtStart = map[partitionID]bool{}
	for _, t := range im.Topics {
		if t.Deleting {
			continue
		}
		for _, p := range assignedHere(t, n.cfg.NodeID) {
			n.foundAtStart[partitionID{t.ID, p}] = true
		}
	}
}

// openFailure is why a partition of the topic could not be opened at the
// last try, or nil.
func (n *Node) openFailure(id [16]byte) error {
	n.localMu.RLock()
	defer n.localMu.RUnlock()
	return n.openFailed[id]
}

// openPartition opens one partition's log, setting aside the directory an
// older topic of the same name left (deleted while this broker was away).
func (n *Node) openPartition(o toOpen) (*logs.Partition, error) {
	part, err := n.logs.Open(o.t.Name, o.p, o.t.ID, o.lt.pc)
	if errors.Is(err, logs.ErrForeignPartition) {
		dir := logs.DirName(o.t.Name, o.p)
		if err = n.logs.SetAside(func(name string) bool { return name == dir }); err == nil {
			part, err = n.logs.Open(o.t.Name, o.p, o.t.ID, o.lt.pc)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("node: open %s: %w", logs.DirName(o.t.Name, o.p), err)
	}
	return part, nil
}

// assignedHere lists the partitions of t that have self among their replicas.
func assignedHere(t *meta.Topic, self int32) []int32 {
	var out []int32
	for p, replicas := range t.Assignment {
		if slices.Contains(replicas, self) {
			out = append(out, int32(p))
		}
	}
	return out
}

func (n *Node) setLocal(name string, lt *localTopic) {
	n.localMu.Lock()
	n.local[name] = lt
	n.localMu.Unlock()
}

// dropLocal closes a local topic's logs and forgets it; then, when remove is
// set (the topic is being deleted), removes its partition directories, and
// otherwise sets them aside.
func (n *Node) dropLocal(name string, lt *localTopic, remove bool) error {
	n.localMu.Lock()
	delete(n.local, name)
	n.localMu.Unlock()
	var errs []error
	maxPart := int32(0)
	for i, p := range lt.parts {
		n.fetchers.remove(p)
		closeLog := p.Close
		if remove {
			closeLog = p.Discard // its files go next: nothing to flush
		}
		if err := closeLog(); err != nil && !errors.Is(err, partlog.ErrClosed) {
			errs = append(errs, fmt.Errorf("node: close %s: %w", logs.DirName(name, i), err))
		}
		p.wakeAll()
		maxPart = max(maxPart, i+1)
	}
	lt.closeRecompressors()
	if remove {
		errs = append(errs, n.logs.Remove(name, lt.id, maxPart))
	} else {
		errs = append(errs, n.logs.SetAside(func(dir string) bool {
			t, p, _ := logs.ParseDirName(dir)
			_, open := lt.parts[p]
			return t == name && open
		}))
	}
	return errors.Join(errs...)
}

// partitionConfig is what t's configs (its own over the broker defaults of
// im) mean to its logs, and the effective configs it was made of. The
// configs were validated when they were written; a store edited by hand is
// checked again here (syntax only: a plugin that is gone must not keep the
// topic from opening) and refused naming the topic.
func (n *Node) partitionConfig(t *meta.Topic, im *meta.Image) (logs.PartitionConfig, map[string]string, error) {
	own, err := topicconfig.Normalize(t.Configs, nil)
	if err != nil {
		return logs.PartitionConfig{}, nil, fmt.Errorf("node: topic %q: stored configs: %w", t.Name, err)
	}
	if t.Name == OffsetsTopic {
		// The broker's own topic: compacted whatever it was created with.
		own = maps.Clone(own)
		maps.Copy(own, n.offsetsTopicConfigs())
	}
	eff := topicconfig.Resolve(own, n.topicDefaults(im))
	pc, err := logs.ConfigFor(eff, n.plugins, n.cfg.Clock)
	if err != nil {
		return logs.PartitionConfig{}, nil, fmt.Errorf("node: topic %q: %w", t.Name, err)
	}
	return pc, eff, nil
}

// reconfigureLocal applies t's configs, when they changed (its own, or the
// broker defaults it inherits), to its open partitions (the loop's, from
// reconcile). The recompressor is kept when the codec and batch limit did
// not change; retention settings that changed take effect at once (a
// retention pass over the topic's partitions). A change that cannot be
// applied is logged, and the partitions keep what they had.
func (n *Node) reconfigureLocal(t *meta.Topic, lt *localTopic, im *meta.Image) {
	defaults := n.topicDefaults(im)
	if lt.checked == t && maps.Equal(lt.checkedDefaults, defaults) {
		return
	}
	lt.checked, lt.checkedDefaults = t, defaults
	own, err := topicconfig.Normalize(t.Configs, nil)
	if err != nil {
		own = nil // partitionConfig reports it
	}
	if t.Name == OffsetsTopic {
		own = maps.Clone(own)
		maps.Copy(own, n.offsetsTopicConfigs())
	}
	if err == nil && maps.Equal(topicconfig.Resolve(own, defaults), lt.eff) {
		return
	}
	pc, eff, err := n.partitionConfig(t, im)
	if err != nil {
		n.logger.Error("topic configs changed but cannot be applied; keeping the old ones", "topic", t.Name, "err", err)
		return
	}
	same := func(keys ...string) bool {
		for _, k := range keys {
			if eff[k] != lt.eff[k] {
				return false
			}
		}
		return true
	}
	if pc.Recompress != nil && lt.pc.Recompress != nil &&
		same(topicconfig.CompressionType, topicconfig.CompressionGzipLevel, topicconfig.MaxMessageBytes) {
		pc.Recompress.Close()
		pc.Recompress = lt.pc.Recompress
	} else if lt.pc.Recompress != nil {
		lt.retired = append(lt.retired, lt.pc.Recompress)
	}
	retention := !same(topicconfig.RetentionMs, topicconfig.RetentionBytes, topicconfig.CleanupPolicy)
	n.localMu.RLock()
	parts := slices.Collect(maps.Values(lt.parts))
	n.localMu.RUnlock()
	for _, p := range parts {
		if err := p.Reconfigure(pc); err != nil && !errors.Is(err, partlog.ErrClosed) {
			n.logger.Error("applying altered topic configs", "topic", t.Name, "partition", p.Index, "err", err)
		}
	}
	lt.pc, lt.eff = pc, eff
	n.logger.Info("applied topic configs", "topic", t.Name, "partitions", len(parts), "configs", eff)
	if retention {
		before := n.cfg.Clock.Now().Add(-producerExpiry).UnixMilli()
		for _, p := range parts {
			if err := p.ApplyRetention(before); err != nil && !errors.Is(err, errClosedLog) {
				n.logger.Warn("retention after a config change", "topic", t.Name, "partition", p.Index, "err", err)
			}
		}
	}
}

// closeRecompressors closes the topic's recompressors (after its logs).
func (lt *localTopic) closeRecompressors() {
	if lt.pc.Recompress != nil {
		lt.pc.Recompress.Close()
	}
	for _, rc := range lt.retired {
		rc.Close()
	}
}

// closeLocal closes every open partition log (at shutdown).
func (n *Node) closeLocal() error {
	n.localMu.Lock()
	local := n.local
	n.local = map[string]*localTopic{}
	n.localMu.Unlock()
	// Closing a partition written since it opened is a few fsyncs (the
	// seal, the checkpoint, the marker): in parallel, as opening is.
	type closing struct {
		name string
		i    int32
		p    *replicated
	}
	var all []closing
	for name, lt := range local {
		for i, p := range lt.parts {
			all = append(all, closing{name, i, p})
		}
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan closing)
	for range min(openWorkers, len(all)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if err := c.p.Close(); err != nil && !errors.Is(err, partlog.ErrClosed) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("node: close %s: %w", logs.DirName(c.name, c.i), err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range all {
		next <- c
	}
	close(next)
	wg.Wait()
	for _, lt := range local {
		lt.closeRecompressors()
	}
	return errors.Join(errs...)
}

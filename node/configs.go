package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/topicconfig"
)

// Dynamic configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs).
//
// A topic's configs live in /config/topics/<t> (its own keys only); the
// broker-wide defaults in /config/brokers/<default> and /config/brokers/<id>
// (Kafka's broker names: log.retention.ms), over the broker's own
// Config.TopicDefaults (topicconfig.Layers). Any broker alters them, as in
// Kafka's ZooKeeper mode, by compare-and-set on the node it read; every
// broker watches them (the loop), so the next image carries the change and
// reconcile applies it to the open partitions (logs.Partition.Reconfigure):
// segment size and age, retention (a retention pass runs at once), the
// batch limit, the flush policy, codec, durable acks, min.insync.replicas and
// compaction settings change without a restart, on every broker. An alter
// returns once this broker's image has it, so a DescribeConfigs sent to the
// same broker next reads it back.

// ConfigOp is an IncrementalAlterConfigs operation (Kafka's OpType).
type ConfigOp int8

const (
	ConfigSet      ConfigOp = 0
	ConfigDelete   ConfigOp = 1
	ConfigAppend   ConfigOp = 2 // list-typed keys: add items not there yet
	ConfigSubtract ConfigOp = 3 // list-typed keys: remove items
)

// ConfigChange is one change of an alter.
type ConfigChange struct {
	Name  string
	Op    ConfigOp
	Value *string
}

// ErrInvalidConfigRequest: a config request weir cannot act on whatever the
// values (an unknown operation, another broker's static configs); the
// message says what (INVALID_REQUEST).
var ErrInvalidConfigRequest = errors.New("node: invalid config request")

// alterWait bounds how long an alter waits for this broker's image to carry
// it.
const alterWait = 10 * time.Second

// brokerLayers are the broker layers of the topic configs for one image.
type brokerLayers struct {
	im             *meta.Image
	broker         map[string]string // this broker's dynamic configs, topic keys
	clusterDefault map[string]string // every broker's, topic keys
	defaults       map[string]string // both over the static ones (n.defaults)
}

// layers returns the broker layers of im (computed once per image).
func (n *Node) layers(im *meta.Image) *brokerLayers {
	if c := n.layersCache.Load(); c != nil && c.im == im {
		return c
	}
	bl := &brokerLayers{im: im,
		broker:         n.dynamicDefaults(im, layout.BrokerEntity(n.cfg.NodeID)),
		clusterDefault: n.dynamicDefaults(im, layout.DefaultBrokerEntity)}
	bl.defaults = topicconfig.Layers{Broker: bl.broker, ClusterDefault: bl.clusterDefault, Static: n.defaults}.Defaults()
	n.layersCache.Store(bl)
	return bl
}

// topicDefaults are the defaults every topic of im inherits on this broker.
func (n *Node) topicDefaults(im *meta.Image) map[string]string { return n.layers(im).defaults }

// dynamicDefaults maps one broker config node of im onto topic keys. Keys
// weir cannot use (another tool wrote them: listeners, log.retention.hours)
// and bad values are skipped, so one does not hide the others.
func (n *Node) dynamicDefaults(im *meta.Image, entity string) map[string]string {
	out := map[string]string{}
	for _, b := range slices.Sorted(maps.Keys(im.BrokerConfigs[entity])) {
		one, err := topicconfig.BrokerToTopic(map[string]string{b: im.BrokerConfigs[entity][b]}, nil)
		if err != nil {
			n.logger.Debug("dynamic broker config ignored", "entity", entity, "err", err)
			continue
		}
		maps.Copy(out, one)
	}
	return out
}

// DescribeTopicConfigs describes every config of a topic (DescribeConfigs of
// a TOPIC resource): the value in effect on this broker, its source and
// synonyms. ErrUnknownTopic when there is none.
func (n *Node) DescribeTopicConfigs(name string) ([]topicconfig.Entry, error) {
	im, _ := n.image.load()
	t := im.Topics[name]
	if t == nil || t.Deleting {
		return nil, unknownTopic(name)
	}
	bl := n.layers(im)
	own := t.Configs
	if name == OffsetsTopic {
		own = maps.Clone(own)
		maps.Copy(own, n.offsetsTopicConfigs())
	}
	return topicconfig.DescribeTopic(topicconfig.Layers{Topic: own, Broker: bl.broker, ClusterDefault: bl.clusterDefault,
		Static: n.defaults}), nil
}

// DescribeBrokerConfigs describes a BROKER resource: "" is the cluster-wide
// default (what /config/brokers/<default> sets), this broker's id its topic
// defaults with their sources, and a few read-only settings. Another
// broker's id is ErrInvalidConfigRequest, as Kafka answers: ask that broker.
func (n *Node) DescribeBrokerConfigs(name string) ([]topicconfig.Entry, error) {
	im, _ := n.image.load()
	bl := n.layers(im)
	l := topicconfig.Layers{Broker: bl.broker, ClusterDefault: bl.clusterDefault, Static: n.defaults}
	if name == "" {
		return topicconfig.DescribeBroker(l, true), nil
	}
	if name != layout.BrokerEntity(n.cfg.NodeID) {
		return nil, fmt.Errorf("%w: broker %q: this is broker %d; ask that broker, or name the cluster default \"\"",
			ErrInvalidConfigRequest, name, n.cfg.NodeID)
	}
	out := topicconfig.DescribeBroker(l, false)
	static := func(name string, typ topicconfig.Type, value, doc string) topicconfig.Entry {
		v := value
		return topicconfig.Entry{Key: topicconfig.Key{Name: name, Type: typ, Doc: doc}, Value: &v,
			Source: topicconfig.SourceStaticBroker, ReadOnly: true,
			Synonyms: []topicconfig.Synonym{{Name: name, Value: &v, Source: topicconfig.SourceStaticBroker}}}
	}
	out = append(out,
		static("broker.id", topicconfig.TypeInt, strconv.Itoa(int(n.cfg.NodeID)), "This broker's id."),
		static("num.partitions", topicconfig.TypeInt, strconv.Itoa(int(n.cfg.DefaultPartitions)),
			"Partitions of auto-created topics and of CreateTopics asking for -1."),
		static("auto.create.topics.enable", topicconfig.TypeBoolean, strconv.FormatBool(n.cfg.AutoCreateTopics),
			"Create a topic the first time a client names it (Metadata, Produce)."),
		static("offsets.topic.num.partitions", topicconfig.TypeInt, strconv.Itoa(int(n.cfg.OffsetsPartitions)),
			"Partitions of __consumer_offsets when this broker creates it."),
		static("offsets.topic.replication.factor", topicconfig.TypeShort, strconv.Itoa(int(n.cfg.OffsetsReplicationFactor)),
			"Replication factor of __consumer_offsets when this broker creates it."),
		static("log.dirs", topicconfig.TypeString, n.cfg.DataDir, "The data directory."),
	)
	slices.SortFunc(out, func(a, b topicconfig.Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// apply applies changes to cur (a config node's map, copied), for
// IncrementalAlterConfigs (replace false) or AlterConfigs (replace: the
// changes, all sets, are the new configs whole). listKey reports whether a
// key is list-typed, and its default (APPEND and SUBTRACT start from the
// current value, or the default when unset, as Kafka does).
func applyChanges(cur map[string]string, changes []ConfigChange, replace bool, listKey func(string) (string, bool)) (map[string]string, error) {
	out := maps.Clone(cur)
	if replace || out == nil {
		out = map[string]string{}
	}
	seen := map[string]bool{}
	for _, c := range changes {
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: %s named twice", ErrInvalidConfigRequest, c.Name)
		}
		seen[c.Name] = true
		val := ""
		if c.Value != nil {
			val = *c.Value
		}
		switch c.Op {
		case ConfigSet:
			if c.Value == nil {
				if replace {
					continue
				}
				return nil, fmt.Errorf("%w: %s: SET without a value", topicconfig.ErrInvalidConfig, c.Name)
			}
			out[c.Name] = val
		case ConfigDelete:
			delete(out, c.Name)
		case ConfigAppend, ConfigSubtract:
			def, ok := listKey(c.Name)
			if !ok {
				return nil, fmt.Errorf("%w: %s=%q: APPEND and SUBTRACT are for list-typed configs only", topicconfig.ErrInvalidConfig, c.Name, val)
			}
			old, set := out[c.Name]
			if !set {
				old = def
			}
			items := splitList(old)
			for _, v := range splitList(val) {
				i := slices.Index(items, v)
				switch {
				case c.Op == ConfigAppend && i < 0:
					items = append(items, v)
				case c.Op == ConfigSubtract && i >= 0:
					items = slices.Delete(items, i, i+1)
				}
			}
			out[c.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: %s: unknown operation %d", ErrInvalidConfigRequest, c.Name, c.Op)
		}
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// topicListKey: the list-typed topic keys and their defaults.
func topicListKey(name string) (string, bool) {
	k, ok := topicconfig.Lookup(name)
	if !ok || k.Type != topicconfig.TypeList {
		return "", false
	}
	return *k.Default, true
}

// brokerListKey: the list-typed broker keys (by broker name).
func brokerListKey(name string) (string, bool) {
	if t, ok := topicconfig.TopicKeyOf(name); ok {
		return topicListKey(t)
	}
	return "", false
}

// AlterTopicConfigs changes a topic's configs (AlterConfigs with replace,
// IncrementalAlterConfigs without) and waits until this broker applies them.
// Values are checked as at creation (topicconfig.ErrInvalidConfig naming
// the key and value), and the result with the broker defaults as a whole;
// with validateOnly nothing is written. ErrUnknownTopic when there is none.
func (n *Node) AlterTopicConfigs(ctx context.Context, name string, changes []ConfigChange, replace, validateOnly bool) error {
	for attempt := 0; ; attempt++ {
		im, _ := n.image.load()
		if t := im.Topics[name]; t == nil || t.Deleting {
			return unknownTopic(name)
		}
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		cur, version, err := layout.ReadConfig(sctx, n.store, layout.ConfigTopicPath(name))
		cancel()
		if err != nil {
			return fmt.Errorf("node: alter configs of topic %q: %w", name, err)
		}
		next, err := applyChanges(cur, changes, replace, topicListKey)
		if err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		if next, err = topicconfig.Normalize(next, n.plugins); err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		if err := topicconfig.CheckEffective(topicconfig.Resolve(next, n.topicDefaults(im))); err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		if validateOnly {
			return nil
		}
		sctx, cancel = context.WithTimeout(ctx, storeTimeout)
		err = layout.WriteTopicConfig(sctx, n.store, name, next, version)
		cancel()
		switch {
		case err == nil:
			n.logger.Info("altered topic configs", "topic", name, "configs", next)
			n.awaitImage(ctx, func(im *meta.Image) bool {
				t := im.Topics[name]
				return t == nil || maps.Equal(t.Configs, next)
			})
			return nil
		case errors.Is(err, coord.ErrNoNode):
			return unknownTopic(name)
		case (errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists)) && attempt < 10:
			continue // altered meanwhile: apply the changes to what is there now
		}
		return fmt.Errorf("node: alter configs of topic %q: %w", name, err)
	}
}

// AlterBrokerConfigs changes dynamic broker configs (Kafka's broker names:
// log.retention.ms): name "" is every broker's default, a broker id that
// broker's. Only the broker configs that default topic configs can be set
// (topicconfig.BrokerToTopic); the topics that do not set a key themselves
// follow, on every broker concerned.
func (n *Node) AlterBrokerConfigs(ctx context.Context, name string, changes []ConfigChange, replace, validateOnly bool) error {
	entity := name
	if name == "" {
		entity = layout.DefaultBrokerEntity
	} else if !layout.IsBrokerEntity(name) {
		return fmt.Errorf("%w: broker %q: want a broker id, or \"\" for every broker", ErrInvalidConfigRequest, name)
	}
	path := layout.BrokerConfigPath(entity)
	for attempt := 0; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		cur, version, err := layout.ReadConfig(sctx, n.store, path)
		cancel()
		if err != nil {
			return fmt.Errorf("node: alter broker configs %s: %w", entity, err)
		}
		next, err := applyChanges(cur, changes, replace, brokerListKey)
		if err != nil {
			return fmt.Errorf("broker %q: %w", name, err)
		}
		norm, err := topicconfig.BrokerToTopic(next, n.plugins)
		if err != nil {
			return err
		}
		for b := range next { // store the trimmed values
			k, _ := topicconfig.TopicKeyOf(b)
			next[b] = norm[k]
		}
		if validateOnly {
			return nil
		}
		sctx, cancel = context.WithTimeout(ctx, storeTimeout)
		err = layout.WriteBrokerConfig(sctx, n.store, entity, next, version)
		cancel()
		switch {
		case err == nil:
			n.logger.Info("altered broker configs", "broker", entity, "configs", next)
			n.awaitImage(ctx, func(im *meta.Image) bool { return maps.Equal(im.BrokerConfigs[entity], next) })
			return nil
		case (errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists)) && attempt < 10:
			continue
		}
		return fmt.Errorf("node: alter broker configs %s: %w", entity, err)
	}
}

// awaitImage waits (within ctx and alterWait) for an image where cond holds:
// the loop has read back what this broker wrote, and applied it. Not seeing
// it is logged, not an error: the write is done, and the watch delivers it.
func (n *Node) awaitImage(ctx context.Context, cond func(*meta.Image) bool) {
	wctx, cancel := context.WithTimeout(ctx, alterWait)
	defer cancel()
	if _, err := n.image.waitFor(wctx, cond); err != nil {
		n.logger.Warn("config change written, not seen in the cluster image yet", "err", err)
	}
}

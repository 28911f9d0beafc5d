package topicconfig

import "maps"

// Source is where a config value comes from, as DescribeConfigs v1+
// reports it (Kafka's ConfigSource, by its wire number).
type Source int8

const (
	SourceUnknown Source = 0
	// SourceTopic: the topic's own config (DYNAMIC_TOPIC_CONFIG,
	// /config/topics/<t>).
	SourceTopic Source = 1
	// SourceDynamicBroker: set for one broker (DYNAMIC_BROKER_CONFIG,
	// /config/brokers/<id>).
	SourceDynamicBroker Source = 2
	// SourceDynamicDefaultBroker: set for every broker
	// (DYNAMIC_DEFAULT_BROKER_CONFIG, /config/brokers/<default>).
	SourceDynamicDefaultBroker Source = 3
	// SourceStaticBroker: the broker's own configuration, its command line
	// (STATIC_BROKER_CONFIG).
	SourceStaticBroker Source = 4
	// SourceDefault: Kafka's default (DEFAULT_CONFIG).
	SourceDefault Source = 5
)

// Layers are a topic's config values by where they come from, each in topic
// key names and normalised. Defaults merges the broker layers; Resolve puts
// the topic's own over them.
type Layers struct {
	Topic          map[string]string // the topic's own
	Broker         map[string]string // this broker's dynamic configs
	ClusterDefault map[string]string // every broker's dynamic configs
	Static         map[string]string // the broker's configuration (node.Config.TopicDefaults)
}

// Defaults merges the broker layers: this broker's dynamic configs over the
// cluster-wide ones over the static ones (Kafka's order).
func (l Layers) Defaults() map[string]string {
	out := make(map[string]string, len(l.Static)+len(l.ClusterDefault)+len(l.Broker))
	maps.Copy(out, l.Static)
	maps.Copy(out, l.ClusterDefault)
	maps.Copy(out, l.Broker)
	return out
}

// Effective is Resolve(l.Topic, l.Defaults()).
func (l Layers) Effective() map[string]string { return Resolve(l.Topic, l.Defaults()) }

// Synonym is one layer's value of a config, named as that layer names it
// (a broker layer by the broker config: log.retention.ms).
type Synonym struct {
	Name   string
	Value  *string
	Source Source
}

// Entry is one config as DescribeConfigs reports it.
type Entry struct {
	Key
	// Value in effect; nil for a key without a value (weir.flush.policy
	// when nothing sets it).
	Value  *string
	Source Source
	// Synonyms are the layers that set the key, the one in effect first,
	// then Kafka's default.
	Synonyms []Synonym
	// ReadOnly: AlterConfigs cannot change it (broker settings that are
	// not topic defaults). Topic configs never are.
	ReadOnly bool
	// Sensitive: the value is a secret and not shown. None is, yet.
	Sensitive bool
}

// DescribeTopic describes every key of a topic whose configs come from l,
// in catalog order: the value in effect (as Resolve decides, so the flush
// keys come as a group from the topic or from the broker layers), where it
// comes from, and its synonyms.
func DescribeTopic(l Layers) []Entry {
	eff := l.Effective()
	topicFlush := false
	for _, k := range flushKeys {
		if _, ok := l.Topic[k]; ok {
			topicFlush = true
		}
	}
	out := make([]Entry, 0, len(catalog))
	for _, k := range catalog {
		e := Entry{Key: k, Source: SourceDefault}
		isFlush := false
		for _, f := range flushKeys {
			isFlush = isFlush || f == k.Name
		}
		if v, ok := l.Topic[k.Name]; ok {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k.Name, Value: str(v), Source: SourceTopic})
		}
		if !(isFlush && topicFlush) {
			e.Synonyms = append(e.Synonyms, brokerSynonyms(k, l)...)
		}
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		if v, ok := eff[k.Name]; ok {
			e.Value = str(v)
		} else {
			e.Value = k.Default
		}
		if k.Default != nil {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k.brokerName(), Value: k.Default, Source: SourceDefault})
		}
		out = append(out, e)
	}
	return out
}

// DescribeBroker describes the topic defaults a broker applies (a BROKER
// resource): every key that has a broker config, named by it, with the
// value in effect and its synonyms from the broker layers of l (l.Topic is
// not read). With clusterDefault, it describes the cluster-wide default
// resource instead (the broker named ""), which lists only what
// l.ClusterDefault sets, as Kafka does.
func DescribeBroker(l Layers, clusterDefault bool) []Entry {
	var out []Entry
	for _, k := range catalog {
		if k.Broker == "" {
			continue
		}
		e := Entry{Key: k, Source: SourceDefault, Value: k.Default}
		e.Name = k.Broker
		if clusterDefault {
			v, ok := l.ClusterDefault[k.Name]
			if !ok {
				continue
			}
			e.Value, e.Source = str(v), SourceDynamicDefaultBroker
			e.Synonyms = []Synonym{{Name: k.Broker, Value: e.Value, Source: e.Source}}
			out = append(out, e)
			continue
		}
		e.Synonyms = brokerSynonyms(k, l)
		if len(e.Synonyms) > 0 {
			e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		}
		if k.Default != nil {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k.Broker, Value: k.Default, Source: SourceDefault})
		}
		out = append(out, e)
	}
	return out
}

// brokerSynonyms are the broker layers of l that set k, most specific
// first.
func brokerSynonyms(k Key, l Layers) []Synonym {
	var out []Synonym
	for _, layer := range []struct {
		m   map[string]string
		src Source
	}{{l.Broker, SourceDynamicBroker}, {l.ClusterDefault, SourceDynamicDefaultBroker}, {l.Static, SourceStaticBroker}} {
		if v, ok := layer.m[k.Name]; ok {
			out = append(out, Synonym{Name: k.brokerName(), Value: str(v), Source: layer.src})
		}
	}
	return out
}

// brokerName is the name a broker layer gives the key.
func (k Key) brokerName() string {
	if k.Broker != "" {
		return k.Broker
	}
	return k.Name
}

package layout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/weir-broker/weir/core/coord"
)

// Dynamic configs, Kafka's ZooKeeper-mode nodes (AdminZkClient):
//
//	/config/topics/<t>           a topic's own configs (topic key names)
//	/config/brokers/<default>    every broker's dynamic configs (broker key names: log.retention.ms)
//	/config/brokers/<id>         one broker's dynamic configs
//
// each {"version":1,"config":{...}}, written by compare-and-set on the
// version read, so two concurrent alters never lose each other's change
// silently (the second gets coord.ErrBadVersion and reads again). Kafka
// also writes a sequential /config/changes/config_change_<n> node that its
// brokers watch; weir's brokers watch the config nodes themselves, so it
// writes none (a Kafka broker would not notice weir's changes without a
// restart: weir's cluster is weir's brokers).

// ConfigBrokersPath is the parent of the broker config nodes.
const ConfigBrokersPath = "/config/brokers"

// DefaultBrokerEntity names the config node of every broker's defaults
// (Kafka's ConfigEntityName.Default).
const DefaultBrokerEntity = "<default>"

// BrokerConfigPath is /config/brokers/<entity>: entity is a broker id or
// DefaultBrokerEntity.
func BrokerConfigPath(entity string) string { return ConfigBrokersPath + "/" + entity }

// BrokerEntity returns the entity of broker id's config node.
func BrokerEntity(id int32) string { return strconv.FormatInt(int64(id), 10) }

// IsBrokerEntity reports whether a child of /config/brokers is
// DefaultBrokerEntity or a broker id.
func IsBrokerEntity(entity string) bool { return checkBrokerEntity(entity) == nil }

// checkBrokerEntity accepts DefaultBrokerEntity and broker ids.
func checkBrokerEntity(entity string) error {
	if entity == DefaultBrokerEntity {
		return nil
	}
	if _, ok := parseID(entity); !ok {
		return fmt.Errorf("%w: broker config entity %q: want a broker id or %s", ErrInvalid, entity, DefaultBrokerEntity)
	}
	return nil
}

// ReadConfig reads a config node (topic or broker): its configs and the
// version to write back with WriteConfig; a missing node is no configs and
// version -1.
func ReadConfig(ctx context.Context, s coord.Store, path string) (map[string]string, int32, error) {
	data, st, err := s.Get(ctx, path)
	if errors.Is(err, coord.ErrNoNode) {
		return map[string]string{}, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("layout: read config %s: %w", path, err)
	}
	cfg, err := DecodeTopicConfig(path, data)
	if err != nil {
		return nil, 0, err
	}
	return cfg, st.Version, nil
}

// WriteTopicConfig replaces a topic's configs if its config node is at
// version (as ReadConfig returned it; -1: missing, created then). The topic
// must exist (its assignment node is checked in the same Multi): otherwise
// coord.ErrNoNode. A concurrent change is coord.ErrBadVersion (or
// ErrNodeExists): read again.
func WriteTopicConfig(ctx context.Context, s coord.Store, topic string, cfg map[string]string, version int32) error {
	if err := checkTopicRef(topic); err != nil {
		return fmt.Errorf("layout: write config of topic %q: %w", topic, err)
	}
	if err := writeConfig(ctx, s, ConfigTopicsPath, ConfigTopicPath(topic), cfg, version, TopicPath(topic)); err != nil {
		return fmt.Errorf("layout: write config of topic %q: %w", topic, err)
	}
	return nil
}

// WriteBrokerConfig replaces /config/brokers/<entity> if it is at version
// (-1: missing, created then, with its parents).
func WriteBrokerConfig(ctx context.Context, s coord.Store, entity string, cfg map[string]string, version int32) error {
	if err := checkBrokerEntity(entity); err != nil {
		return fmt.Errorf("layout: write broker config: %w", err)
	}
	if err := writeConfig(ctx, s, ConfigBrokersPath, BrokerConfigPath(entity), cfg, version, ""); err != nil {
		return fmt.Errorf("layout: write broker config %s: %w", entity, err)
	}
	return nil
}

func writeConfig(ctx context.Context, s coord.Store, parent, path string, cfg map[string]string, version int32, check string) error {
	if err := coord.EnsurePath(ctx, s, parent); err != nil {
		return err
	}
	var ops []coord.Op
	if check != "" {
		ops = append(ops, &coord.CheckOp{Path: check, Version: coord.AnyVersion})
	}
	data := EncodeTopicConfig(cfg)
	if version < 0 {
		ops = append(ops, &coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent})
	} else {
		ops = append(ops, &coord.SetOp{Path: path, Data: data, Version: version})
	}
	_, err := s.Multi(ctx, ops...)
	return err
}

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/filestore"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/vfs"
)

// Before the coordination store, a single node kept its topics in
// weir-meta.json (format version 1). A broker that finds one migrates it once:
// every topic becomes a topic in the store assigned wholly to this broker,
// with the same id (the partition directories' markers name it) and configs,
// pending deletions become deletion requests, and the producer-id counter
// becomes the first free producer-id block; then the file is renamed
// weir-meta.json.migrated (kept, never deleted).
const (
	legacyMetaFile     = "weir-meta.json"
	legacyMetaMigrated = "weir-meta.json.migrated"
)

// ErrMissingMetadata: the data directory holds partition directories but the
// coordination store knows no topic and there is no metadata file to migrate:
// the node refuses to start rather than serve an empty broker over data it
// cannot name.
var ErrMissingMetadata = errors.New("node: metadata missing")

type legacyMeta struct {
	Version        int           `json:"version"`
	Topics         []legacyTopic `json:"topics"`
	NextProducerID int64         `json:"nextProducerID"`
	Deleting       []legacyTopic `json:"deleting,omitempty"`
}

type legacyTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// migrate moves weir-meta.json into the store (see above). Without one, a
// file store that knows no topic over a data directory holding partition
// directories is ErrMissingMetadata, naming them.
func (n *Node) migrate(ctx context.Context, store coord.Store) error {
	name := filepath.Join(n.cfg.DataDir, legacyMetaFile)
	b, err := vfs.ReadFile(n.cfg.FS, name)
	if errors.Is(err, fs.ErrNotExist) {
		return n.refuseWithoutMeta(ctx, store)
	}
	if err != nil {
		return fmt.Errorf("node: read %s: %w", name, err)
	}
	m, err := decodeLegacy(name, b)
	if err != nil {
		return err
	}
	for _, lt := range m.Topics {
		id, _ := logs.ParseTopicID(lt.ID) // checked by decodeLegacy
		t := &meta.Topic{Name: lt.Name, ID: id, Assignment: make([][]int32, lt.Partitions), Configs: lt.Configs}
		for i := range t.Assignment {
			t.Assignment[i] = []int32{n.cfg.NodeID}
		}
		if err := layout.CreateTopic(ctx, store, t); err != nil && !errors.Is(err, layout.ErrTopicExists) {
			return fmt.Errorf("node: migrating %s: topic %q: %w", name, lt.Name, err)
		}
	}
	for _, lt := range m.Deleting {
		id, _ := logs.ParseTopicID(lt.ID)
		t := &meta.Topic{Name: lt.Name, ID: id, Assignment: make([][]int32, lt.Partitions)}
		for i := range t.Assignment {
			t.Assignment[i] = []int32{n.cfg.NodeID}
		}
		if err := layout.CreateTopic(ctx, store, t); err != nil && !errors.Is(err, layout.ErrTopicExists) {
			return fmt.Errorf("node: migrating %s: deleting %q: %w", name, lt.Name, err)
		}
		if err := layout.RequestDeletion(ctx, store, lt.Name); err != nil {
			return fmt.Errorf("node: migrating %s: deleting %q: %w", name, lt.Name, err)
		}
	}
	if m.NextProducerID > 0 {
		// Ids below nextProducerID may have been handed out: reserve them.
		if _, err := layout.AllocateProducerIDs(ctx, store, n.cfg.NodeID, m.NextProducerID); err != nil {
			return fmt.Errorf("node: migrating %s: producer ids: %w", name, err)
		}
	}
	if err := n.cfg.FS.Rename(name, filepath.Join(n.cfg.DataDir, legacyMetaMigrated)); err != nil {
		return fmt.Errorf("node: migrating %s: %w", name, err)
	}
	if err := n.cfg.FS.SyncDir(n.cfg.DataDir); err != nil {
		return fmt.Errorf("node: migrating %s: %w", name, err)
	}
	n.logger.Info("migrated the single-node metadata file into the coordination store",
		"file", name, "topics", len(m.Topics), "deleting", len(m.Deleting), "now", legacyMetaMigrated)
	return nil
}

// refuseWithoutMeta returns ErrMissingMetadata when the store knows no topic
// but the data directory holds partition directories; a store shared with
// other brokers (ZooKeeper) is authoritative instead: directories it does not
// name are set aside later, once the image is read.
func (n *Node) refuseWithoutMeta(ctx context.Context, store coord.Store) error {
	if n.cfg.Coord != nil || n.cfg.ZooKeeper != "" {
		return nil
	}
	names, _, err := store.Children(ctx, layout.TopicsPath)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		return fmt.Errorf("node: %w", err)
	}
	if len(names) > 0 {
		return nil
	}
	found, err := n.logs.PartitionDirs()
	if err != nil || len(found) == 0 {
		return err
	}
	shown := found
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(found)-10))
	}
	return fmt.Errorf("%w: %s holds %d partition directories (%s) but no metadata names them (neither %s nor %s): restore it, or move the directories away",
		ErrMissingMetadata, n.cfg.DataDir, len(found), strings.Join(shown, ", "), filestore.FileName, legacyMetaFile)
}

func decodeLegacy(name string, b []byte) (legacyMeta, error) {
	var m legacyMeta
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, name, err)
	}
	if m.Version != 1 {
		return m, fmt.Errorf("%w: %s: version %d, this weir migrates version 1", ErrCorruptMetadata, name, m.Version)
	}
	if m.NextProducerID < 0 {
		return m, fmt.Errorf("%w: %s: negative nextProducerID %d", ErrCorruptMetadata, name, m.NextProducerID)
	}
	seen := map[string]bool{}
	for _, list := range [][]legacyTopic{m.Topics, m.Deleting} {
		for _, t := range list {
			if err := logs.ValidateName(t.Name); err != nil {
				return m, fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, name, err)
			}
			if seen[t.Name] {
				return m, fmt.Errorf("%w: %s: topic %q listed twice", ErrCorruptMetadata, name, t.Name)
			}
			seen[t.Name] = true
			if _, err := logs.ParseTopicID(t.ID); err != nil {
				return m, fmt.Errorf("%w: %s: topic %q: %w", ErrCorruptMetadata, name, t.Name, err)
			}
			if t.Partitions < 1 || t.Partitions > MaxPartitions {
				return m, fmt.Errorf("%w: %s: topic %q has %d partitions", ErrCorruptMetadata, name, t.Name, t.Partitions)
			}
		}
	}
	return m, nil
}

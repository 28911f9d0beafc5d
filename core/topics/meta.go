package topics

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/vfs"
)

// File names in the data directory and in each partition directory.
const (
	metaFile    = "weir-meta.json"
	metaTmpFile = metaFile + ".tmp"
	metaVersion = 1
)

// metaJSON is the content of weir-meta.json.
type metaJSON struct {
	Version        int         `json:"version"`
	Topics         []metaTopic `json:"topics"`
	NextProducerID int64       `json:"nextProducerID"`
	// Deleting lists topics whose deletion was decided but whose partition
	// directories may still be there: the explicit instruction that lets
	// Open finish the job after a crash (see the package doc).
	Deleting []metaTopic `json:"deleting,omitempty"`
}

type metaTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // 32 hex digits
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"` // explicit only; broker defaults apply at Open
}

// readMeta loads and checks weir-meta.json; a missing file is an empty
// registry.
func readMeta(fsys vfs.FS, dir string) (m metaJSON, exists bool, err error) {
	m, err = decodeMeta(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return metaJSON{Version: metaVersion}, false, nil
	}
	return m, err == nil, err
}

func decodeMeta(fsys vfs.FS, dir string) (metaJSON, error) {
	m := metaJSON{Version: metaVersion}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, err
	}
	if err != nil {
		return m, fmt.Errorf("topics: read %s: %w", metaFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, metaFile, err)
	}
	if m.Version != metaVersion {
		return m, fmt.Errorf("%w: %s: version %d, this weir reads version %d", ErrCorruptMetadata, metaFile, m.Version, metaVersion)
	}
	if m.NextProducerID < 0 {
		return m, fmt.Errorf("%w: %s: negative nextProducerID %d", ErrCorruptMetadata, metaFile, m.NextProducerID)
	}
	for _, t := range m.Deleting {
		if err := logs.ValidateName(t.Name); err != nil {
			return m, fmt.Errorf("%w: %s: deleting: %w", ErrCorruptMetadata, metaFile, err)
		}
		if _, err := logs.ParseTopicID(t.ID); err != nil {
			return m, fmt.Errorf("%w: %s: deleting %q: %w", ErrCorruptMetadata, metaFile, t.Name, err)
		}
		if t.Partitions < 1 || t.Partitions > MaxPartitions {
			return m, fmt.Errorf("%w: %s: deleting %q has %d partitions", ErrCorruptMetadata, metaFile, t.Name, t.Partitions)
		}
	}
	seen := map[string]bool{}
	for _, t := range m.Topics {
		if err := logs.ValidateName(t.Name); err != nil {
			return m, fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, metaFile, err)
		}
		if seen[t.Name] {
			return m, fmt.Errorf("%w: %s: topic %q listed twice", ErrCorruptMetadata, metaFile, t.Name)
		}
		seen[t.Name] = true
		if _, err := logs.ParseTopicID(t.ID); err != nil {
			return m, fmt.Errorf("%w: %s: topic %q: %w", ErrCorruptMetadata, metaFile, t.Name, err)
		}
		if t.Partitions < 1 || t.Partitions > MaxPartitions {
			return m, fmt.Errorf("%w: %s: topic %q has %d partitions", ErrCorruptMetadata, metaFile, t.Name, t.Partitions)
		}
	}
	return m, nil
}

// writeMeta replaces weir-meta.json atomically: write a temporary file, fsync
// it, rename it over the old one, fsync the directory. A crash at any point
// leaves either the old or the new file.
func writeMeta(fsys vfs.FS, dir string, m metaJSON) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("topics: encode %s: %w", metaFile, err)
	}
	b = append(b, '\n')
	tmp, final := filepath.Join(dir, metaTmpFile), filepath.Join(dir, metaFile)
	if err := vfs.WriteFileSynced(fsys, tmp, b); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("topics: write %s: %w", metaFile, err)
	}
	if err := fsys.Rename(tmp, final); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("topics: write %s: %w", metaFile, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("topics: write %s: %w", metaFile, err)
	}
	return nil
}

func newID() ([16]byte, error) {
	var id [16]byte
	for id == ([16]byte{}) { // the zero UUID means "no topic id" in Kafka
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("topics: topic id: %w", err)
		}
	}
	return id, nil
}

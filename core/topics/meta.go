package topics

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/weir-broker/weir/core/vfs"
)

// File names in the data directory and in each partition directory.
const (
	metaFile          = "weir-meta.json"
	metaTmpFile       = metaFile + ".tmp"
	metaVersion       = 1
	partitionMetaFile = "partition.metadata"
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
		if err := ValidateName(t.Name); err != nil {
			return m, fmt.Errorf("%w: %s: deleting: %w", ErrCorruptMetadata, metaFile, err)
		}
		if _, err := parseID(t.ID); err != nil {
			return m, fmt.Errorf("%w: %s: deleting %q: %w", ErrCorruptMetadata, metaFile, t.Name, err)
		}
		if t.Partitions < 1 || t.Partitions > MaxPartitions {
			return m, fmt.Errorf("%w: %s: deleting %q has %d partitions", ErrCorruptMetadata, metaFile, t.Name, t.Partitions)
		}
	}
	seen := map[string]bool{}
	for _, t := range m.Topics {
		if err := ValidateName(t.Name); err != nil {
			return m, fmt.Errorf("%w: %s: %w", ErrCorruptMetadata, metaFile, err)
		}
		if seen[t.Name] {
			return m, fmt.Errorf("%w: %s: topic %q listed twice", ErrCorruptMetadata, metaFile, t.Name)
		}
		seen[t.Name] = true
		if _, err := parseID(t.ID); err != nil {
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
	if err := writeSynced(fsys, tmp, b); err != nil {
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

// writeSynced creates name with contents b and fsyncs it (not its directory).
func writeSynced(fsys vfs.FS, name string, b []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
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

func parseID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("bad topic id %q: want 32 hex digits", s)
	}
	copy(id[:], b)
	if id == ([16]byte{}) {
		return id, fmt.Errorf("bad topic id %q: zero", s)
	}
	return id, nil
}

// The partition.metadata file marks a directory as a weir partition and names
// its topic id (Kafka keeps the same file for the same reason):
//
//	version: 1
//	topic_id: <32 hex digits>
//
// Open deletes a "<topic>-<n>" directory that no topic owns only if the
// marker is there, so a data directory shared with other files never loses
// them; and a partition whose marker names another topic id is refused rather
// than served as the wrong topic's data.
func partitionMeta(id [16]byte) []byte {
	return []byte("version: 1\ntopic_id: " + hex.EncodeToString(id[:]) + "\n")
}

// readPartitionMeta returns the topic id in dir's marker, ok=false when the
// marker is missing or unreadable (a crash while writing it), and an error
// only when the directory cannot be examined.
func readPartitionMeta(fsys vfs.FS, dir string) (id [16]byte, ok bool, err error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, partitionMetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "version: 1" || !strings.HasPrefix(lines[1], "topic_id: ") {
		return id, false, nil
	}
	id, err = parseID(strings.TrimPrefix(lines[1], "topic_id: "))
	return id, err == nil, nil
}

// writePartitionMeta writes dir's marker and makes its entry durable.
func writePartitionMeta(fsys vfs.FS, dir string, id [16]byte) error {
	if err := writeSynced(fsys, filepath.Join(dir, partitionMetaFile), partitionMeta(id)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// isWeirPartitionDir reports whether dir may be removed as a weir partition:
// it holds the marker, or nothing at all.
func isWeirPartitionDir(fsys vfs.FS, dir string) (bool, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return false, err
	}
	return len(names) == 0 || slices.Contains(names, partitionMetaFile), nil
}

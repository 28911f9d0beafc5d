package logs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/weir-broker/weir/core/vfs"
)

// MarkerFile marks a directory as a weir partition and names its topic id.
const MarkerFile = "partition.metadata"

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

// ReadMarker returns the topic id in dir's marker, ok=false when the
// marker is missing or unreadable (a crash while writing it), and an error
// only when the directory cannot be examined.
func ReadMarker(fsys vfs.FS, dir string) (id [16]byte, ok bool, err error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, MarkerFile))
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
	id, err = ParseTopicID(strings.TrimPrefix(lines[1], "topic_id: "))
	return id, err == nil, nil
}

// WriteMarker writes dir's marker and makes its entry durable.
func WriteMarker(fsys vfs.FS, dir string, id [16]byte) error {
	if err := vfs.WriteFileSynced(fsys, filepath.Join(dir, MarkerFile), partitionMeta(id)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ParseTopicID parses a topic id written as 32 hex digits (not all zero).
func ParseTopicID(s string) ([16]byte, error) {
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

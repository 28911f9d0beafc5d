package node

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/vfs"
)

// metaFile is the broker's identity file in the data directory, named and
// shaped like Kafka's: key=value lines, # comments.
const metaFile = "meta.properties"

// ErrNodeMismatch: the data directory was written by a broker with another
// node id.
var ErrNodeMismatch = errors.New("node: data directory belongs to another node")

// identity is what meta.properties records.
type identity struct {
	ClusterID string
	NodeID    int32
}

// loadIdentity reads dir's meta.properties; fresh is true when there is none
// yet, and then the identity holds a made-up cluster id that saveIdentity
// writes once the cluster's own is known (a broker joining a cluster takes
// the cluster's id).
func loadIdentity(fsys vfs.FS, dir string, nodeID int32) (id identity, fresh bool, err error) {
	name := filepath.Join(dir, metaFile)
	props, err := readProperties(fsys, name)
	switch {
	case err == nil:
		id := identity{ClusterID: props["cluster.id"], NodeID: nodeID}
		if id.ClusterID == "" {
			return identity{}, false, fmt.Errorf("node: %s has no cluster.id", name)
		}
		if n, err := strconv.ParseInt(props["node.id"], 10, 32); err != nil || int32(n) != nodeID {
			return identity{}, false, fmt.Errorf("%w: %s says node.id=%q, this broker is node %d", ErrNodeMismatch, name, props["node.id"], nodeID)
		}
		return id, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return identity{}, false, err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return identity{}, false, fmt.Errorf("node: cluster id: %w", err)
	}
	return identity{ClusterID: base64.RawURLEncoding.EncodeToString(raw[:]), NodeID: nodeID}, true, nil
}

// saveIdentity writes dir's meta.properties (atomically: temporary file,
// fsync, rename, directory fsync).
func saveIdentity(fsys vfs.FS, dir string, id identity) error {
	content := fmt.Sprintf("# weir broker identity, written on first start\nversion=1\ncluster.id=%s\nnode.id=%d\n", id.ClusterID, id.NodeID)
	return writeFileAtomic(fsys, filepath.Join(dir, metaFile), []byte(content))
}

func readProperties(fsys vfs.FS, name string) (map[string]string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("node: %s: %w", name, err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("node: read %s: %w", name, err)
	}
	props := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(buf))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("node: %s: line %q is not key=value", name, line)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, sc.Err()
}

func writeFileAtomic(fsys vfs.FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("node: create %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("node: write %s: %w", name, err)
	}
	return nil
}

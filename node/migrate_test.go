package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/vfs"
)

// singleNode opens a single node (the file store) on fsys's /data.
func singleNode(t *testing.T, fsys vfs.FS) (*Node, error) {
	t.Helper()
	n, err := Open(Config{DataDir: "/data", FS: fsys, Advertised: "127.0.0.1:9092", Logger: testLogger(t)})
	if err == nil {
		t.Cleanup(func() { n.Close() })
	}
	return n, err
}

// A data directory written before the coordination store (weir-meta.json,
// format 1) is migrated once: its topics keep their ids, configs and data,
// pending deletions finish, producer ids are not handed out again, and the
// file is kept as weir-meta.json.migrated.
func TestMigrateLegacyMetadata(t *testing.T) {
	mem := vfs.NewMem()
	kept, gone := [16]byte{0xaa, 1}, [16]byte{0xbb, 2}
	m, err := logs.NewManager(logs.Options{FS: mem, Dir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(2) {
		p, err := m.Open("orders", i, kept, logs.PartitionConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Append(context.Background(), oneRecord(t, fmt.Sprint("old-", i))); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	p, err := m.Open("old", 0, gone, logs.PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	legacy := fmt.Sprintf(`{"version": 1,
 "topics": [{"name": "orders", "id": %q, "partitions": 2, "configs": {"retention.ms": "86400000"}}],
 "nextProducerID": 2000,
 "deleting": [{"name": "old", "id": %q, "partitions": 1}]}`, hex.EncodeToString(kept[:]), hex.EncodeToString(gone[:]))
	if err := vfs.WriteFileSynced(mem, "/data/"+legacyMetaFile, []byte(legacy)); err != nil {
		t.Fatal(err)
	}

	n, err := singleNode(t, mem)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := n.Topic("orders")
	if err != nil || ti.ID != kept || len(ti.Partitions) != 2 || ti.Configs["retention.ms"] != "86400000" {
		t.Fatalf("migrated topic: %+v, %v", ti, err)
	}
	for i := range int32(2) {
		part, err := n.Partition("orders", i)
		if err != nil {
			t.Fatal(err)
		}
		if hw := part.HighWatermark(); hw != 1 {
			t.Errorf("orders-%d: high watermark %d, want its 1 old record", i, hw)
		}
	}
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := n.image.waitFor(wctx, func(im *meta.Image) bool { return im.Topics["old"] == nil }); err != nil {
		t.Fatalf("the pending deletion of old did not finish: %v", err)
	}
	if ok, _ := n.logs.Exists("old", 0); ok {
		t.Error("the pending deletion of old left its directory")
	}
	if id, _, err := n.InitProducerID(ctx); err != nil || id < 2000 {
		t.Errorf("InitProducerID after migration: %d, %v; want >= 2000 (ids below may be in use)", id, err)
	}
	if _, err := mem.Stat("/data/" + legacyMetaMigrated); err != nil {
		t.Errorf("%s: %v", legacyMetaMigrated, err)
	}
	if _, err := mem.Stat("/data/" + legacyMetaFile); err == nil {
		t.Errorf("%s still there after migration", legacyMetaFile)
	}
}

// A single node whose metadata is gone (weir-meta.json deleted by hand, a
// restore that missed the store file) refuses to start, naming the partition
// directories, and leaves them as they are.
func TestMissingMetadataRefusesToStart(t *testing.T) {
	mem := vfs.NewMem()
	m, err := logs.NewManager(logs.Options{FS: mem, Dir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("precious", 0, [16]byte{7}, logs.PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(context.Background(), oneRecord(t, "keep me")); err != nil {
		t.Fatal(err)
	}
	p.Close()
	_, err = singleNode(t, mem)
	if !errors.Is(err, ErrMissingMetadata) || !strings.Contains(err.Error(), "precious-0") {
		t.Fatalf("Open without metadata: %v, want ErrMissingMetadata naming precious-0", err)
	}
	if names, err := mem.List("/data/precious-0"); err != nil || len(names) < 2 {
		t.Fatalf("precious-0 after the refusal: %v, %v", names, err)
	}
}

// A single node restarts on its data, cleanly or after a power cut, with its
// topics, their leader and what was durable.
func TestSingleNodeRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			mem := vfs.NewMem()
			n, err := singleNode(t, mem)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: -1,
				Configs: map[string]string{"weir.durable.acks": "true"}}); err != nil {
				t.Fatal(err)
			}
			req := ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: 1, Records: oneRecord(t, "durable")}}}
			n.Produce(ctx, &req)
			if err := req.Partitions[0].Err; err != nil {
				t.Fatal(err)
			}
			fsys := vfs.FS(mem)
			if crash {
				fsys = mem.CrashClone()
			}
			n.Close()
			n2, err := singleNode(t, fsys)
			if err != nil {
				t.Fatal(err)
			}
			p, err := n2.Partition("t", 1)
			if err != nil {
				t.Fatal(err)
			}
			if hw := p.HighWatermark(); hw != 1 {
				t.Errorf("high watermark %d after restart, want 1", hw)
			}
			if id := n2.ControllerID(); id != 0 {
				t.Errorf("controller %d, want this node (0)", id)
			}
		})
	}
}

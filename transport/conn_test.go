package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
)

// batch builds one uncompressed batch of n records with values "<prefix>-i".
func batch(t testing.TB, prefix string, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i), Timestamp: 1_700_000_000_000 + int64(i)}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceReq(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
	return req
}

func TestApiVersionsReportsRegistry(t *testing.T) {
	b := startBroker(t)
	rc := b.dial(t)
	for v := int16(0); v <= apiByKey[apiVersionsKey].max; v++ {
		resp := rc.do(apiVersionsReq(v)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != len(apis) {
			t.Fatalf("v%d: %d keys, registry has %d", v, len(resp.ApiKeys), len(apis))
		}
		for i, k := range resp.ApiKeys {
			a := apis[i]
			if k.ApiKey != a.key || k.MinVersion != a.min || k.MaxVersion != a.max {
				t.Errorf("v%d: key %d reported %d..%d, registry %d: %d..%d", v, k.ApiKey, k.MinVersion, k.MaxVersion, a.key, a.min, a.max)
			}
		}
	}
}

// Clients open with their newest ApiVersions; an unknown version gets a
// v0-shaped body with UNSUPPORTED_VERSION and the ranges, then the client
// retries on the same connection.
func TestApiVersionsUnknownVersion(t *testing.T) {
	b := startBroker(t)
	rc := b.dial(t)
	for _, v := range []int16{5, 127, -1} {
		req := apiVersionsReq(v)
		corr := rc.send(req)
		raw, err := rc.readFrame()
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		v0 := kmsg.NewPtrApiVersionsResponse()
		v0.Version = 0
		body, err := decodeResponseHeader(raw, corr, v0)
		if err != nil {
			t.Fatal(err)
		}
		if err := v0.ReadFrom(body); err != nil {
			t.Fatalf("v%d: not a v0 body: %v", v, err)
		}
		if v0.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want 35", v, v0.ErrorCode)
		}
		i := slices.IndexFunc(v0.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == apiVersionsKey })
		if i < 0 || v0.ApiKeys[i].MaxVersion != apiByKey[apiVersionsKey].max || len(v0.ApiKeys) != len(apis) {
			t.Fatalf("v%d: ranges %+v", v, v0.ApiKeys)
		}
		// The exact bytes: a v0 body has nothing after the keys.
		if want := v0.AppendTo(nil); !bytes.Equal(body, want) {
			t.Fatalf("v%d: body is not exactly v0:\n got %x\nwant %x", v, body, want)
		}
	}
	// The connection still works.
	if resp := rc.do(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("retry at v3: error %d", resp.ErrorCode)
	}
}

// Each bad input closes only its own connection: a fresh one is served, and
// data produced before is intact.
func TestBadInputClosesConnection(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxRequestBytes = 1 << 20 })
	b.createTopic(t, "t", 1, nil)
	good := b.dial(t)
	if resp := good.do(produceReq(7, -1, "t", 0, batch(t, "before", 3))).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %d", resp.Topics[0].Partitions[0].ErrorCode)
	}

	header := func(key, version int16) []byte {
		h := binary.BigEndian.AppendUint16(nil, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, 1)
		return binary.BigEndian.AppendUint16(h, 0xffff) // null client ID
	}
	sized := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	validMetadata := frame(&kmsg.MetadataRequest{Version: 4}, 1, nil)

	cases := []struct {
		name  string
		bytes []byte
		half  bool // close our writing side after sending
	}{
		{"truncated frame", validMetadata[:len(validMetadata)-3], true},
		{"truncated size", []byte{0, 0}, true},
		{"lying length, too long", append(binary.BigEndian.AppendUint32(nil, 500), validMetadata[4:]...), true},
		{"lying length, too short", append(binary.BigEndian.AppendUint32(nil, 12), validMetadata[4:]...), false},
		{"oversized", binary.BigEndian.AppendUint32(nil, 1<<20+1), false},
		{"huge", binary.BigEndian.AppendUint32(nil, 0x7fffffff), false},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff), false},
		{"below header size", sized([]byte{0, 3, 0, 4, 0, 0}), false},
		{"unknown key", sized(header(1000, 0)), false},
		{"unserved key (SaslHandshake)", sized(header(17, 1)), false},
		{"unserved key (OffsetForLeaderEpoch)", sized(header(23, 3)), false},
		{"negative key", sized(header(-1, 0)), false},
		{"produce v11", sized(append(header(0, 11), make([]byte, 20)...)), false},
		{"fetch v12", sized(append(header(1, 12), make([]byte, 40)...)), false},
		{"metadata v13", sized(header(3, 13)), false},
		{"bad client ID length", sized(append(header(3, 4)[:8], 0x7f, 0xff)), false},
		{"garbage produce body", sized(append(header(0, 7), 0xff, 0xff, 0xff, 0xff, 1, 2, 3)), false},
		{"produce with huge array", sized(append(header(0, 3), 0xff, 0xff, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff)), false},
		{"metadata body cut short", sized(append(header(3, 4), 0, 0, 0, 5, 0)), false},
		{"flexible header, bad tags", sized(append(header(3, 9), 0x85)), false},
		{"flexible header, tag past end", sized(append(header(3, 9), 1, 0, 50, 1)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := b.dial(t)
			rc.write(tc.bytes)
			if tc.half {
				rc.c.(interface{ CloseWrite() error }).CloseWrite()
			}
			rc.expectClosed()
			b.checkAlive(t)
		})
	}

	// Nothing was lost or added: the partition holds the 3 records.
	p, err := b.node.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := p.Stats().LogEndOffset; end != 3 {
		t.Fatalf("log end %d after bad input, want 3", end)
	}
}

// Random bodies for every served API and version: each is answered (with our
// correlation ID) or closes its connection, and nothing panics (startBroker
// fails the test if the server logged one). Requests that may rightly block
// (a long-polling Fetch, a JoinGroup or SyncGroup waiting for the group) are
// not waited for.
func TestGarbageBodiesNeverCrash(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 2, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	blocking := map[int16]bool{1: true, 11: true, 14: true}
	for _, a := range apis {
		for v := a.min; v <= a.max; v++ {
			for range 8 {
				body := make([]byte, rng.IntN(64))
				for i := range body {
					body[i] = byte(rng.UintN(256))
				}
				f := binary.BigEndian.AppendUint16(nil, uint16(a.key))
				f = binary.BigEndian.AppendUint16(f, uint16(v))
				f = binary.BigEndian.AppendUint32(f, 7)
				f = binary.BigEndian.AppendUint16(f, 0)
				f = append(f, body...)
				rc := b.dial(t)
				rc.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...))
				if !blocking[a.key] {
					if resp, err := rc.readFrame(); err == nil && binary.BigEndian.Uint32(resp) != 7 {
						t.Fatalf("%s v%d: answer with correlation %d", kmsg.NameForKey(a.key), v, binary.BigEndian.Uint32(resp))
					}
				}
				rc.c.Close()
			}
		}
	}
	b.checkAlive(t)
}

func TestCorruptBatchAppendsNothing(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)

	good := batch(t, "good", 2)
	corrupt := batch(t, "bad", 2)
	corrupt[len(corrupt)-1] ^= 0xff // breaks the CRC
	for _, records := range [][]byte{corrupt, append(slices.Clone(good), corrupt...), good[:40], {}} {
		resp := rc.do(produceReq(7, -1, "t", 0, records)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.CorruptMessage.Code {
			t.Fatalf("%d bytes: error %d, want CORRUPT_MESSAGE", len(records), code)
		}
	}
	p, _ := b.node.Partition("t", 0)
	if end := p.Stats().LogEndOffset; end != 0 {
		t.Fatalf("log end %d after corrupt batches, want 0", end)
	}
	// The same connection goes on.
	resp := rc.do(produceReq(7, -1, "t", 0, good)).(*kmsg.ProduceResponse)
	if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("good batch: error %d at %d", sp.ErrorCode, sp.BaseOffset)
	}
}

// Pipelined requests are answered in order, each with its correlation ID.
func TestPipelinedInOrder(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	var out []byte
	var reqs []kmsg.Request
	for i := range 20 {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			req = produceReq(int16(3+i%8), 1, "t", 0, batch(t, "p", 1))
		case 1:
			req = &kmsg.MetadataRequest{Version: int16(i % 13)}
		default:
			req = apiVersionsReq(int16(i % 5))
		}
		reqs = append(reqs, req)
		out = append(out, frame(req, int32(100+i), nil)...)
	}
	rc.write(out)
	for i, req := range reqs {
		rc.recv(req, int32(100+i))
	}
	p, _ := b.node.Partition("t", 0)
	if end := p.Stats().LogEndOffset; end != 7 {
		t.Fatalf("log end %d, want 7", end)
	}
}

// acks=0 gets no response; a failed acks=0 produce closes the connection.
func TestProduceAcksZero(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	rc.send(produceReq(7, 0, "t", 0, batch(t, "a", 2)))
	// The next answer is the metadata request's.
	rc.do(&kmsg.MetadataRequest{Version: 4})
	p, _ := b.node.Partition("t", 0)
	if end := p.Stats().LogEndOffset; end != 2 {
		t.Fatalf("log end %d, want 2", end)
	}
	rc.send(produceReq(7, 0, "unknown", 0, batch(t, "a", 2)))
	rc.expectClosed()

	rc = b.dial(t)
	resp := rc.do(produceReq(7, 2, "t", 0, batch(t, "a", 1))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d", code)
	}
}

func TestProduceErrors(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "t", 1, map[string]string{"max.message.bytes": "200"})
	rc := b.dial(t)
	check := func(name string, req *kmsg.ProduceRequest, want int16) {
		t.Helper()
		resp := rc.do(req).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("%s: error %d, want %d", name, got, want)
		}
	}
	check("unknown topic", produceReq(7, 1, "nope", 0, batch(t, "a", 1)), kerr.UnknownTopicOrPartition.Code)
	check("unknown partition", produceReq(7, 1, "t", 5, batch(t, "a", 1)), kerr.UnknownTopicOrPartition.Code)
	check("too large", produceReq(7, 1, "t", 0, batch(t, "a", 50)), kerr.MessageTooLarge.Code)
	// A transactional id with a plain batch is a produce like any other
	// (no coordinator verifies it here); a control batch is the broker's
	// to write, never a client's.
	txn := produceReq(7, 1, "t", 0, batch(t, "a", 1))
	txn.TransactionID = kmsg.StringPtr("txn")
	check("transactional id", txn, 0)
	ctl := record.BuildControlBatch(record.ControlBatchOptions{ProducerID: 1, ProducerEpoch: 0, Commit: true})
	check("control batch", produceReq(7, 1, "t", 0, ctl), kerr.InvalidRecord.Code)

	// Idempotent producer: sequences are checked, duplicates answered with
	// the original offset.
	pid := rc.do(&kmsg.InitProducerIDRequest{Version: 4, TransactionTimeoutMillis: 60000}).(*kmsg.InitProducerIDResponse)
	if pid.ErrorCode != 0 || pid.ProducerID < 0 {
		t.Fatalf("InitProducerId: error %d, id %d", pid.ErrorCode, pid.ProducerID)
	}
	idem := func(seq int32) []byte {
		opts := record.DefaultBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid.ProducerID, pid.ProducerEpoch, seq
		bb, err := record.Build(opts, []record.Record{{Value: []byte("x"), Timestamp: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return bb
	}
	check("unknown producer", produceReq(7, -1, "t", 0, idem(3)), kerr.UnknownProducerID.Code)
	first := rc.do(produceReq(7, -1, "t", 0, idem(0))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if first.ErrorCode != 0 {
		t.Fatalf("seq 0: error %d", first.ErrorCode)
	}
	dup := rc.do(produceReq(7, -1, "t", 0, idem(0))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if dup.ErrorCode != 0 || dup.BaseOffset != first.BaseOffset {
		t.Fatalf("duplicate: error %d at %d, want 0 at %d", dup.ErrorCode, dup.BaseOffset, first.BaseOffset)
	}
	check("gap", produceReq(7, -1, "t", 0, idem(5)), kerr.OutOfOrderSequenceNumber.Code)
	p, _ := b.node.Partition("t", 0)
	if end := p.Stats().LogEndOffset; end != first.BaseOffset+1 {
		t.Fatalf("log end %d, want %d", end, first.BaseOffset+1)
	}
}

// With durable acks, a produce answers after the fsync covering it, for
// every partition of the request (appended concurrently, sharing fsyncs).
func TestProduceDurableAcks(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "d", 3, map[string]string{"weir.durable.acks": "true"})
	rc := b.dial(t)
	req := produceReq(7, -1, "d", 0, batch(t, "d0", 3))
	for p := int32(1); p < 3; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch(t, "dp", 2)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	resp := rc.do(req).(*kmsg.ProduceResponse)
	for i, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != 0 || sp.BaseOffset != 0 {
			t.Fatalf("partition %d: error %d at %d", i, sp.ErrorCode, sp.BaseOffset)
		}
		p, _ := b.node.Partition("d", sp.Partition)
		if flushed, end := p.Stats().FlushedOffset, p.Stats().LogEndOffset; flushed != end || end == 0 {
			t.Fatalf("partition %d: answered with flushed %d of %d", i, flushed, end)
		}
	}
}

package layout_test

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

// Every decoder: never a panic; an error is ErrMalformed naming the path;
// what decodes, encodes to bytes that decode to the same value. Seeds:
// empty, the zero object, valid, valid plus garbage, and the malformed
// table's inputs.

func seed(f *testing.F, decoder string, valid ...[]byte) {
	f.Add([]byte{})
	f.Add([]byte("{}"))
	f.Add([]byte("null"))
	for _, v := range valid {
		f.Add(v)
		f.Add(append(slices.Clone(v), '}'))
		f.Add(v[:len(v)/2])
	}
	for _, tc := range malformedCases {
		if tc.decoder == decoder {
			f.Add([]byte(tc.data))
		}
	}
}

func checkErr(t *testing.T, path string, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	if !errors.Is(err, layout.ErrMalformed) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v: want ErrMalformed naming %s", err, path)
	}
	return true
}

func FuzzDecodeBroker(f *testing.F) {
	seed(f, "broker",
		layout.EncodeBroker(meta.Broker{Host: "h", Port: 9092, Rack: ptr("r")}, 1),
		[]byte(`{"version":5,"host":"a","port":1,"endpoints":["PLAINTEXT://b:2","X://:3"],"jmx_port":-1,"listener_security_protocol_map":{"X":"SSL","PLAINTEXT":"PLAINTEXT"}}`),
		[]byte(`{"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://kafka-2:9093"],"jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}`),
		[]byte(`{"jmx_port":-1,"timestamp":"1","host":"kafka-0","version":1,"port":9092}`))
	const path = "/brokers/ids/4"
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := layout.DecodeBroker(path, data, coord.Stat{Czxid: 9})
		if checkErr(t, path, err) {
			return
		}
		if b.ID != 4 || b.Epoch != 9 || b.Host == "" || b.Port < 1 || b.Port > 65535 {
			t.Fatalf("decoded %+v", b)
		}
		if len(b.Endpoints) == 0 {
			t.Fatalf("decoded %+v without endpoints", b)
		}
		// Encoding writes the endpoints, and the top-level address from
		// them (as Kafka does): they survive, with the rack.
		again, err := layout.DecodeBroker(path, layout.EncodeBroker(b, 0), coord.Stat{Czxid: 9})
		if err != nil && !slices.ContainsFunc(b.Endpoints, func(e meta.Endpoint) bool { return e.Host != "" }) {
			return // endpoints without a host: only the top-level one had an address
		}
		if err != nil || !slices.Equal(again.Endpoints, b.Endpoints) || !reflect.DeepEqual(again.Rack, b.Rack) {
			t.Fatalf("%+v re-decoded as %+v, %v", b, again, err)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	seed(f, "assignment",
		layout.EncodeAssignment(idBytes, [][]int32{{1, 2}, {2, 1}}),
		[]byte(`{"version":2,"partitions":{"1":[2],"0":[1]},"adding_replicas":{"0":[3]},"removing_replicas":{}}`))
	const path = "/brokers/topics/t"
	f.Fuzz(func(t *testing.T, data []byte) {
		id, asg, err := layout.DecodeAssignment(path, data)
		if checkErr(t, path, err) {
			return
		}
		id2, asg2, err := layout.DecodeAssignment(path, layout.EncodeAssignment(id, asg))
		if err != nil || id2 != id || !slices.EqualFunc(asg, asg2, slices.Equal) {
			t.Fatalf("%x %v re-decoded as %x %v, %v", id, asg, id2, asg2, err)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	seed(f, "state",
		layout.EncodeState(meta.PartitionState{Leader: 1, LeaderEpoch: 2, ControllerEpoch: 3, ISR: []int32{1, 2}}),
		[]byte(`{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":4,"isr":[1],"leader_recovery_state":1}`))
	const path = "/brokers/topics/t/partitions/0/state"
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := layout.DecodeState(path, data, coord.Stat{Version: 3})
		if checkErr(t, path, err) {
			return
		}
		again, err := layout.DecodeState(path, layout.EncodeState(s), coord.Stat{Version: 3})
		if err != nil || !again.Equal(s) || again.Version != 3 {
			t.Fatalf("%+v re-decoded as %+v, %v", s, again, err)
		}
	})
}

func FuzzDecodeTopicConfig(f *testing.F) {
	seed(f, "config", layout.EncodeTopicConfig(map[string]string{"a": "1", "b": ""}))
	const path = "/config/topics/t"
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := layout.DecodeTopicConfig(path, data)
		if checkErr(t, path, err) {
			return
		}
		again, err := layout.DecodeTopicConfig(path, layout.EncodeTopicConfig(cfg))
		if err != nil || !maps.Equal(again, cfg) {
			t.Fatalf("%q re-decoded as %q, %v", cfg, again, err)
		}
	})
}

func FuzzDecodeController(f *testing.F) {
	seed(f, "controller", layout.EncodeController(1, 2), []byte(`{"version":1,"brokerid":1001,"timestamp":"1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := layout.DecodeController(layout.ControllerPath, data)
		if checkErr(t, layout.ControllerPath, err) {
			return
		}
		if again, err := layout.DecodeController(layout.ControllerPath, layout.EncodeController(id, 0)); err != nil || again != id {
			t.Fatalf("%d re-decoded as %d, %v", id, again, err)
		}
	})
}

func FuzzDecodeControllerEpoch(f *testing.F) {
	seed(f, "epoch", []byte("0"), []byte("2147483647"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := layout.DecodeControllerEpoch(layout.ControllerEpochPath, data)
		if checkErr(t, layout.ControllerEpochPath, err) {
			return
		}
		if string(layout.EncodeControllerEpoch(e)) != string(data) {
			t.Fatalf("%q decoded as %d", data, e)
		}
	})
}

func FuzzDecodeProducerIDBlock(f *testing.F) {
	seed(f, "producer", layout.EncodeProducerIDBlock(layout.ProducerIDBlock{Broker: 1, First: 0, Last: 999}))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := layout.DecodeProducerIDBlock(layout.ProducerIDBlockPath, data)
		if checkErr(t, layout.ProducerIDBlockPath, err) {
			return
		}
		if again, err := layout.DecodeProducerIDBlock(layout.ProducerIDBlockPath, layout.EncodeProducerIDBlock(b)); err != nil || again != b {
			t.Fatalf("%+v re-decoded as %+v, %v", b, again, err)
		}
	})
}

func FuzzDecodeClusterID(f *testing.F) {
	seed(f, "cluster", layout.EncodeClusterID("abc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := layout.DecodeClusterID(layout.ClusterIDPath, data)
		if checkErr(t, layout.ClusterIDPath, err) {
			return
		}
		if again, err := layout.DecodeClusterID(layout.ClusterIDPath, layout.EncodeClusterID(id)); err != nil || again != id {
			t.Fatalf("%q re-decoded as %q, %v", id, again, err)
		}
	})
}

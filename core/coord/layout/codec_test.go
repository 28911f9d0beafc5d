package layout_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

func ptr[T any](v T) *T { return &v }

// idBytes is 00 01 … 0f; Kafka's Uuid string of it is idString.
var idBytes = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

const idString = "AAECAwQFBgcICQoLDA0ODw"

// TestGolden pins every encoder's bytes: Kafka's keys and versions
// (research/replication.md §1, ZkData.scala), in the package doc's order.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"broker", layout.EncodeBroker(meta.Broker{ID: 1, Host: "h1", Port: 9092, Epoch: 77}, 1700000000000),
			`{"version":5,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h1:9092"],"jmx_port":-1,"timestamp":"1700000000000","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"features":{}}`},
		{"broker with rack", layout.EncodeBroker(meta.Broker{ID: 2, Host: "h2", Port: 9093, Rack: ptr("r1")}, 5),
			`{"version":5,"host":"h2","port":9093,"endpoints":["PLAINTEXT://h2:9093"],"jmx_port":-1,"timestamp":"5","rack":"r1","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"features":{}}`},
		{"broker ipv6", layout.EncodeBroker(meta.Broker{Host: "::1", Port: 9092}, 0),
			`{"version":5,"host":"::1","port":9092,"endpoints":["PLAINTEXT://[::1]:9092"],"jmx_port":-1,"timestamp":"0","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"features":{}}`},
		{"broker with listeners", layout.EncodeBroker(meta.Broker{ID: 3, Host: "10.0.0.3", Port: 9092, Endpoints: []meta.Endpoint{
			{Listener: "INTERNAL", Protocol: "SASL_PLAINTEXT", Host: "10.0.0.3", Port: 9092},
			{Listener: "EXTERNAL", Protocol: "SASL_SSL", Host: "kafka-3.example.com", Port: 9093},
			{Listener: "PLAIN", Protocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9094},
		}}, 7),
			`{"version":5,"host":"127.0.0.1","port":9094,"endpoints":["INTERNAL://10.0.0.3:9092","EXTERNAL://kafka-3.example.com:9093","PLAIN://127.0.0.1:9094"],"jmx_port":-1,"timestamp":"7","listener_security_protocol_map":{"EXTERNAL":"SASL_SSL","INTERNAL":"SASL_PLAINTEXT","PLAIN":"PLAINTEXT"},"features":{}}`},
		{"broker without a PLAINTEXT listener: host null, port -1", layout.EncodeBroker(meta.Broker{ID: 3, Endpoints: []meta.Endpoint{
			{Listener: "SSL", Protocol: "SSL", Host: "h", Port: 9093},
		}}, 7),
			`{"version":5,"host":null,"port":-1,"endpoints":["SSL://h:9093"],"jmx_port":-1,"timestamp":"7","listener_security_protocol_map":{"SSL":"SSL"},"features":{}}`},
		{"assignment", layout.EncodeAssignment(idBytes, [][]int32{{1, 2}, {2, 3}}),
			`{"version":3,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},"removing_replicas":{},"topic_id":"` + idString + `"}`},
		{"assignment, 11 partitions in numeric order", layout.EncodeAssignment(idBytes, slices.Repeat([][]int32{{0}}, 11)),
			`{"version":3,"partitions":{"0":[0],"1":[0],"2":[0],"3":[0],"4":[0],"5":[0],"6":[0],"7":[0],"8":[0],"9":[0],"10":[0]},"adding_replicas":{},"removing_replicas":{},"topic_id":"` + idString + `"}`},
		{"assignment without id", layout.EncodeAssignment([16]byte{}, [][]int32{{1}}),
			`{"version":3,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}`},
		{"state", layout.EncodeState(meta.PartitionState{Leader: 2, LeaderEpoch: 5, ControllerEpoch: 7, ISR: []int32{2, 3}, Version: 9}),
			`{"version":1,"leader":2,"leader_epoch":5,"controller_epoch":7,"isr":[2,3]}`},
		{"state without leader", layout.EncodeState(meta.PartitionState{Leader: -1}),
			`{"version":1,"leader":-1,"leader_epoch":0,"controller_epoch":0,"isr":[]}`},
		{"config", layout.EncodeTopicConfig(map[string]string{"segment.bytes": "1024", "cleanup.policy": "compact"}),
			`{"version":1,"config":{"cleanup.policy":"compact","segment.bytes":"1024"}}`},
		{"config empty", layout.EncodeTopicConfig(nil), `{"version":1,"config":{}}`},
		{"config unescaped", layout.EncodeTopicConfig(map[string]string{"k": "<&>\""}), `{"version":1,"config":{"k":"<&>\""}}`},
		{"controller", layout.EncodeController(3, 1700000000000),
			`{"version":2,"brokerid":3,"timestamp":"1700000000000","kraftControllerEpoch":-1}`},
		{"controller epoch", layout.EncodeControllerEpoch(7), `7`},
		{"producer id block", layout.EncodeProducerIDBlock(layout.ProducerIDBlock{Broker: 1, First: 1000, Last: 1999}),
			`{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}`},
		{"cluster id", layout.EncodeClusterID("abc"), `{"version":"1","id":"abc"}`},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	for _, b := range []meta.Broker{
		{ID: 0, Host: "h", Port: 1, Epoch: 1},
		{ID: 7, Host: "kafka-7.example.com", Port: 9092, Rack: ptr("us-east-1a"), Epoch: 1 << 40},
		{ID: 2147483647, Host: "fe80::1%eth0", Port: 65535, Rack: ptr(""), Epoch: 3},
		{ID: 4, Host: "10.0.0.4", Port: 9092, Epoch: 5, Endpoints: []meta.Endpoint{
			{Listener: "INTERNAL", Protocol: "SASL_SSL", Host: "10.0.0.4", Port: 9092},
			{Listener: "EXTERNAL", Protocol: "SASL_SSL", Host: "kafka-4.example.com", Port: 443},
			{Listener: "REPLICATION_2", Protocol: "SSL", Host: "::1", Port: 9095},
			{Listener: "CLIENTS", Protocol: "SASL_PLAINTEXT", Host: "h", Port: 1},
		}},
		{ID: 5, Host: "h", Port: 2, Endpoints: []meta.Endpoint{ // PLAINTEXT second: it is the top-level address
			{Listener: "TLS", Protocol: "SSL", Host: "g", Port: 1},
			{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: "h", Port: 2},
		}},
	} {
		got, err := layout.DecodeBroker(layout.BrokerPath(b.ID), layout.EncodeBroker(b, 12), coord.Stat{Czxid: b.Epoch})
		if err != nil || !brokerEqual(got, b) {
			t.Errorf("broker %+v: got %+v, %v", b, got, err)
		}
	}
	for _, asg := range [][][]int32{{{0}}, {{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, slices.Repeat([][]int32{{5, 4}}, 100)} {
		for _, id := range [][16]byte{{}, idBytes, {0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0}} {
			gid, gasg, err := layout.DecodeAssignment("/brokers/topics/t", layout.EncodeAssignment(id, asg))
			if err != nil || gid != id || !slices.EqualFunc(gasg, asg, slices.Equal) {
				t.Errorf("assignment %v %x: got %v %x, %v", asg, id, gasg, gid, err)
			}
		}
	}
	for _, s := range []meta.PartitionState{
		{Leader: -1, ISR: []int32{}},
		{Leader: 3, LeaderEpoch: 2147483647, ControllerEpoch: 9, ISR: []int32{3, 1, 2}},
	} {
		got, err := layout.DecodeState("/s", layout.EncodeState(s), coord.Stat{Version: 4})
		if err != nil || !got.Equal(s) || got.Version != 4 {
			t.Errorf("state %+v: got %+v, %v", s, got, err)
		}
	}
	cfg := map[string]string{"a": "", "min.insync.replicas": "2", "ünï": "\x01\"\\"}
	if got, err := layout.DecodeTopicConfig("/c", layout.EncodeTopicConfig(cfg)); err != nil || !maps.Equal(got, cfg) {
		t.Errorf("config: got %v, %v", got, err)
	}
	if got, err := layout.DecodeController("/controller", layout.EncodeController(12, 0)); err != nil || got != 12 {
		t.Errorf("controller: got %d, %v", got, err)
	}
	blk := layout.ProducerIDBlock{Broker: -1, First: 0, Last: 1<<63 - 1}
	if got, err := layout.DecodeProducerIDBlock("/p", layout.EncodeProducerIDBlock(blk)); err != nil || got != blk {
		t.Errorf("producer id block: got %+v, %v", got, err)
	}
	if got, err := layout.DecodeClusterID("/cluster/id", layout.EncodeClusterID("x-Y_z")); err != nil || got != "x-Y_z" {
		t.Errorf("cluster id: got %q, %v", got, err)
	}
}

func brokerEqual(a, b meta.Broker) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Port == b.Port && a.Epoch == b.Epoch &&
		(a.Rack == nil) == (b.Rack == nil) && (a.Rack == nil || *a.Rack == *b.Rack) &&
		slices.Equal(a.Listeners(), b.Listeners())
}

// plaintext is the one endpoint of a broker registered without listeners.
func plaintext(host string, port int32) []meta.Endpoint {
	return []meta.Endpoint{{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: host, Port: port}}
}

// TestDecodeKafkaWritten decodes nodes in the forms Kafka writes them, keys
// in a HashMap's order (as seen in `zookeeper-shell get` output of 0.8 to
// 3.x clusters).
func TestDecodeKafkaWritten(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       meta.Broker
	}{
		{"v1 (0.8)", `{"jmx_port":-1,"timestamp":"1428512949385","host":"kafka-0","version":1,"port":9092}`,
			meta.Broker{ID: 5, Host: "kafka-0", Port: 9092}},
		{"v2", `{"jmx_port":-1,"timestamp":"1460000000000","endpoints":["PLAINTEXT://kafka-0:9092"],"host":"kafka-0","version":2,"port":9092}`,
			meta.Broker{ID: 5, Host: "kafka-0", Port: 9092}},
		{"v3 with rack", `{"jmx_port":-1,"timestamp":"1571666399659","endpoints":["PLAINTEXT://node4.example.com:6667"],"host":"node4.example.com","version":3,"port":6667,"rack":"/default-rack"}`,
			meta.Broker{ID: 5, Host: "node4.example.com", Port: 6667, Rack: ptr("/default-rack")}},
		{"v4", `{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"host":"kafka-1","timestamp":"1614570663881","port":9092,"version":4}`,
			meta.Broker{ID: 5, Host: "kafka-1", Port: 9092}},
		{"v4 SSL only: host null", `{"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://kafka-2:9093"],"jmx_port":-1,"host":null,"timestamp":"1548146237164","port":-1,"version":4}`,
			meta.Broker{ID: 5, Host: "kafka-2", Port: 9093, Endpoints: []meta.Endpoint{{Listener: "SSL", Protocol: "SSL", Host: "kafka-2", Port: 9093}}}},
		{"v5 two listeners, PLAINTEXT second", `{"features":{},"listener_security_protocol_map":{"EXTERNAL":"SSL","INTERNAL":"PLAINTEXT"},"endpoints":["EXTERNAL://ext.example.com:9093","INTERNAL://10.0.0.5:9092"],"jmx_port":9999,"port":-1,"host":null,"version":5,"timestamp":"1700000000000","rack":null}`,
			meta.Broker{ID: 5, Host: "10.0.0.5", Port: 9092, Endpoints: []meta.Endpoint{
				{Listener: "EXTERNAL", Protocol: "SSL", Host: "ext.example.com", Port: 9093},
				{Listener: "INTERNAL", Protocol: "PLAINTEXT", Host: "10.0.0.5", Port: 9092}}}},
		{"v3 two listeners named as protocols, no map", `{"jmx_port":-1,"timestamp":"1","endpoints":["SSL://a:9093","PLAINTEXT://a:9092"],"host":"a","version":3,"port":9092}`,
			meta.Broker{ID: 5, Host: "a", Port: 9092, Endpoints: []meta.Endpoint{
				{Listener: "SSL", Protocol: "SSL", Host: "a", Port: 9093},
				{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: "a", Port: 9092}}}},
		{"v5 SASL_SSL and SASL_PLAINTEXT listeners", `{"features":{},"listener_security_protocol_map":{"CLIENT":"SASL_SSL","BROKER":"SASL_PLAINTEXT"},"endpoints":["BROKER://b-1.internal:9091","CLIENT://b-1.example.com:9094"],"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1"}`,
			meta.Broker{ID: 5, Host: "b-1.internal", Port: 9091, Endpoints: []meta.Endpoint{
				{Listener: "BROKER", Protocol: "SASL_PLAINTEXT", Host: "b-1.internal", Port: 9091},
				{Listener: "CLIENT", Protocol: "SASL_SSL", Host: "b-1.example.com", Port: 9094}}}},
		{"v5 ipv6", `{"features":{"metadata.version":{"min_version":1,"max_version":7}},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://[2001:db8::5]:9092"],"jmx_port":-1,"port":9092,"host":"2001:db8::5","version":5,"timestamp":"1"}`,
			meta.Broker{ID: 5, Host: "2001:db8::5", Port: 9092}},
		{"v5 a newer key", `{"version":5,"host":"h","port":1,"endpoints":["PLAINTEXT://h:1"],"jmx_port":-1,"timestamp":"1","some_future_key":[1,{"x":null}]}`,
			meta.Broker{ID: 5, Host: "h", Port: 1}},
	} {
		got, err := layout.DecodeBroker("/brokers/ids/5", []byte(tc.data), coord.Stat{Czxid: 0})
		if err != nil || !brokerEqual(got, tc.want) {
			t.Errorf("broker %s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}

	for _, tc := range []struct {
		name, data string
		id         [16]byte
		asg        [][]int32
	}{
		{"v1", `{"version":1,"partitions":{"1":[2,1],"0":[1,2]}}`, [16]byte{}, [][]int32{{1, 2}, {2, 1}}},
		{"v2", `{"version":2,"partitions":{"0":[1001]},"adding_replicas":{},"removing_replicas":{}}`, [16]byte{}, [][]int32{{1001}}},
		{"v3", `{"partitions":{"0":[0],"1":[0]},"topic_id":"` + idString + `","adding_replicas":{},"removing_replicas":{},"version":3}`, idBytes, [][]int32{{0}, {0}}},
		{"v3 reassigning", `{"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}`, [16]byte{}, [][]int32{{1, 2, 3}}},
	} {
		id, asg, err := layout.DecodeAssignment("/brokers/topics/t", []byte(tc.data))
		if err != nil || id != tc.id || !slices.EqualFunc(asg, tc.asg, slices.Equal) {
			t.Errorf("assignment %s: got %x %v, %v", tc.name, id, asg, err)
		}
	}

	st, err := layout.DecodeState("/s", []byte(`{"controller_epoch":33,"leader":102,"version":1,"leader_epoch":8,"isr":[102,103]}`), coord.Stat{Version: 12})
	if want := (meta.PartitionState{Leader: 102, LeaderEpoch: 8, ControllerEpoch: 33, ISR: []int32{102, 103}, Version: 12}); err != nil || !st.Equal(want) || st.Version != 12 {
		t.Errorf("state: got %+v, %v", st, err)
	}
	st, err = layout.DecodeState("/s", []byte(`{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":4,"isr":[1],"leader_recovery_state":1}`), coord.Stat{})
	if err != nil || st.Leader != 1 {
		t.Errorf("recovering state: got %+v, %v", st, err)
	}
	cfg, err := layout.DecodeTopicConfig("/c", []byte(`{"version":1,"config":{"cleanup.policy":"compact","segment.bytes":"104857600"}}`))
	if err != nil || len(cfg) != 2 || cfg["cleanup.policy"] != "compact" {
		t.Errorf("config: got %v, %v", cfg, err)
	}
	for data, want := range map[string]int32{
		`{"version":1,"brokerid":1001,"timestamp":"1571666282268"}`:                        1001,
		`{"version":2,"brokerid":0,"timestamp":"1700000000000","kraftControllerEpoch":-1}`: 0,
	} {
		if got, err := layout.DecodeController("/controller", []byte(data)); err != nil || got != want {
			t.Errorf("controller %s: got %d, %v", data, got, err)
		}
	}
	if e, err := layout.DecodeControllerEpoch("/controller_epoch", []byte("1")); err != nil || e != 1 {
		t.Errorf("controller epoch: got %d, %v", e, err)
	}
	if b, err := layout.DecodeProducerIDBlock("/p", []byte(`{"version":1,"broker":0,"block_start":"0","block_end":"999"}`)); err != nil || b != (layout.ProducerIDBlock{First: 0, Last: 999}) {
		t.Errorf("producer id block: got %+v, %v", b, err)
	}
	if id, err := layout.DecodeClusterID("/cluster/id", []byte(`{"version":"1","id":"q7Ta_cD-Rj2Ml5h0xYZ9pA"}`)); err != nil || id != "q7Ta_cD-Rj2Ml5h0xYZ9pA" {
		t.Errorf("cluster id: got %q, %v", id, err)
	}
}

// decoders adapts every decoder to one shape, for the malformed table and
// the fuzz targets.
var decoders = map[string]struct {
	path   string
	decode func(path string, data []byte) error
}{
	"broker":     {"/brokers/ids/3", func(p string, d []byte) error { _, err := layout.DecodeBroker(p, d, coord.Stat{}); return err }},
	"assignment": {"/brokers/topics/t", func(p string, d []byte) error { _, _, err := layout.DecodeAssignment(p, d); return err }},
	"state": {"/brokers/topics/t/partitions/0/state", func(p string, d []byte) error {
		_, err := layout.DecodeState(p, d, coord.Stat{})
		return err
	}},
	"config":     {"/config/topics/t", func(p string, d []byte) error { _, err := layout.DecodeTopicConfig(p, d); return err }},
	"controller": {"/controller", func(p string, d []byte) error { _, err := layout.DecodeController(p, d); return err }},
	"epoch":      {"/controller_epoch", func(p string, d []byte) error { _, err := layout.DecodeControllerEpoch(p, d); return err }},
	"producer":   {"/latest_producer_id_block", func(p string, d []byte) error { _, err := layout.DecodeProducerIDBlock(p, d); return err }},
	"cluster":    {"/cluster/id", func(p string, d []byte) error { _, err := layout.DecodeClusterID(p, d); return err }},
}

const okBroker = `"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1`

// malformedCases: each input gives ErrMalformed naming the path and saying why.
var malformedCases = []struct {
	decoder, data, why string
	path               string // default: the decoder's
}{
	{"broker", ``, "empty", ""},
	{"broker", `{` + okBroker, "unexpected EOF", ""},
	{"broker", `[1]`, "want a JSON object", ""},
	{"broker", `null`, "want a JSON object", ""},
	{"broker", `{` + okBroker + `} {}`, "data after", ""},
	{"broker", `{` + okBroker + `}x`, "data after", ""},
	{"broker", `{"version":5,,}`, "invalid character", ""},
	{"broker", `{` + okBroker + `,"host":"g"}`, `duplicate key "host"`, ""},
	{"broker", "{\"version\":5,\"host\":\"\xff\"}", "not UTF-8", ""},
	{"broker", `{"version":"5","host":"h","port":9092,"endpoints":[],"jmx_port":-1}`, `"version": want an int32`, ""},
	{"broker", `{"version":5.0,"host":"h","port":9092,"endpoints":[],"jmx_port":-1}`, `"version": want an int32`, ""},
	{"broker", `{"version":6,"host":"h","port":9092,"endpoints":[],"jmx_port":-1}`, "out of range", ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":[]}`, `missing key "jmx_port"`, ""},
	{"broker", `{"version":5,"host":"h","port":"9092","endpoints":[],"jmx_port":-1}`, `"port": want an int32`, ""},
	{"broker", `{"version":5,"host":"h","port":70000,"endpoints":[],"jmx_port":-1}`, "out of range", ""},
	{"broker", `{"version":5,"host":"h","port":9092,"jmx_port":-1}`, `missing key "endpoints"`, ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":"PLAINTEXT://h:1","jmx_port":-1}`, "want an array", ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":["h:9092"],"jmx_port":-1}`, "LISTENER://host:port", ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":[7],"jmx_port":-1}`, "want a string", ""},
	{"broker", `{"version":5,"host":null,"port":-1,"endpoints":[],"jmx_port":-1}`, "no address", ""},
	{"broker", `{"version":1,"port":9092,"jmx_port":-1}`, "version 1", ""},
	{"broker", `{` + okBroker + `,"rack":5}`, `"rack": want a string or null`, ""},
	{"broker", `{` + okBroker + `,"features":[]}`, `"features": want an object`, ""},
	{"broker", `{` + okBroker + `,"listener_security_protocol_map":{"PLAINTEXT":1}}`, `"listener_security_protocol_map"."PLAINTEXT": want a string`, ""},
	{"broker", `{` + okBroker + `,"listener_security_protocol_map":{"PLAINTEXT":"TLS"}}`, `"listener_security_protocol_map"."PLAINTEXT": want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, have "TLS"`, ""},
	{"broker", `{"version":5,"host":null,"port":-1,"endpoints":["INTERNAL://h:9092"],"jmx_port":-1,"listener_security_protocol_map":{"EXTERNAL":"SSL"}}`,
		`"endpoints"[0]: listener INTERNAL has no security protocol in "listener_security_protocol_map"`, ""},
	{"broker", `{"version":5,"host":null,"port":-1,"endpoints":["INTERNAL://h:9092"],"jmx_port":-1}`,
		`"endpoints"[0]: listener INTERNAL has no security protocol`, ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092","PLAINTEXT://h:9093"],"jmx_port":-1}`,
		`"endpoints"[1]: listener PLAINTEXT appears twice`, ""},
	{"broker", `{"version":5,"host":"h","port":9092,"endpoints":["A B://h:9092"],"jmx_port":-1}`, "LISTENER://host:port", ""},
	{"broker", `{` + okBroker + `}`, "not a broker id", "/brokers/ids/-1"},
	{"broker", `{` + okBroker + `}`, "not a broker id", "/brokers/ids/01"},
	{"broker", `{` + okBroker + `}`, "not a broker registration", "/brokers/topics/1"},

	{"assignment", `{"version":3}`, `missing key "partitions"`, ""},
	{"assignment", `{"version":3,"partitions":{}}`, "no partitions", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1],"0":[2]}}`, `duplicate key "0"`, ""},
	{"assignment", `{"version":3,"partitions":{"0":[1],"2":[1]}}`, "want partitions 0 to 1", ""},
	{"assignment", `{"version":3,"partitions":{"01":[1]}}`, "want partitions 0 to 0", ""},
	{"assignment", `{"version":3,"partitions":{"-1":[1]}}`, "want partitions 0 to 0", ""},
	{"assignment", `{"version":3,"partitions":{"0":[-1]}}`, "want a broker id", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1,1]}}`, "broker 1 appears twice", ""},
	{"assignment", `{"version":3,"partitions":{"0":[]}}`, "no replicas", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1.0]}}`, "want a broker id", ""},
	{"assignment", `{"version":3,"partitions":{"0":["1"]}}`, "want a broker id", ""},
	{"assignment", `{"version":3,"partitions":{"0":{"1":2}}}`, "want an array", ""},
	{"assignment", `{"version":3,"partitions":[[1]]}`, "want an object", ""},
	{"assignment", `{"version":4,"partitions":{"0":[1]}}`, "out of range", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"topic_id":"AAECAwQFBgcICQoLDA0OD"}`, "22 characters of base64url", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"topic_id":"AAECAwQFBgcICQoLDA0ODw=="}`, "22 characters of base64url", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"topic_id":"AAECAwQFBgcICQoLDA0OD+"}`, "22 characters of base64url", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"topic_id":"AAECAwQFBgcICQoLDA0ODx"}`, "22 characters of base64url", ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"topic_id":7}`, `"topic_id": want a string`, ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"adding_replicas":[]}`, `"adding_replicas": want an object`, ""},
	{"assignment", `{"version":3,"partitions":{"0":[1]},"removing_replicas":{"x":[1]}}`, "is not a partition", ""},

	{"state", `{"version":1,"leader":-2,"leader_epoch":0,"controller_epoch":0,"isr":[]}`, "out of range", ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":-1,"controller_epoch":0,"isr":[1]}`, "out of range", ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":2147483648,"isr":[1]}`, `"controller_epoch": want an int32`, ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1,2,1]}`, "appears twice", ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0}`, `missing key "isr"`, ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":null}`, "want an array", ""},
	{"state", `{"version":2,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1]}`, "out of range", ""},
	{"state", `{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1],"leader_recovery_state":2}`, "out of range", ""},
	{"state", `{"version":1,"leader":true,"leader_epoch":0,"controller_epoch":0,"isr":[1]}`, `"leader": want an int32`, ""},

	{"config", `{"version":1}`, `missing key "config"`, ""},
	{"config", `{"version":1,"config":null}`, "want an object", ""},
	{"config", `{"version":1,"config":{"retention.ms":1000}}`, `"config"."retention.ms": want a string`, ""},
	{"config", `{"version":2,"config":{}}`, "out of range", ""},

	{"controller", `{"version":2,"brokerid":-1}`, "out of range", ""},
	{"controller", `{"version":2}`, `missing key "brokerid"`, ""},
	{"controller", `{"version":2,"brokerid":"1"}`, "want an int32", ""},
	{"controller", `{"version":3,"brokerid":1}`, "out of range", ""},
	{"controller", `{"version":2,"brokerid":1,"timestamp":1}`, `"timestamp": want a string`, ""},

	{"epoch", ``, "want a decimal epoch", ""},
	{"epoch", `-1`, "want a decimal epoch", ""},
	{"epoch", `01`, "want a decimal epoch", ""},
	{"epoch", `1 `, "want a decimal epoch", ""},
	{"epoch", `2147483648`, "want a decimal epoch", ""},
	{"epoch", `{"epoch":1}`, "want a decimal epoch", ""},

	{"producer", `{"version":1,"broker":0,"block_start":0,"block_end":"999"}`, `"block_start": want a string`, ""},
	{"producer", `{"version":1,"broker":0,"block_start":"1000","block_end":"999"}`, "before block_start", ""},
	{"producer", `{"version":1,"broker":0,"block_start":"-5","block_end":"999"}`, "decimal int64 >= 0", ""},
	{"producer", `{"version":1,"block_start":"0","block_end":"999"}`, `missing key "broker"`, ""},

	{"cluster", `{"version":1,"id":"x"}`, `"version": want a string`, ""},
	{"cluster", `{"version":"2","id":"x"}`, "unsupported version", ""},
	{"cluster", `{"version":"1","id":""}`, "empty", ""},
	{"cluster", `{"version":"1"}`, `missing key "id"`, ""},
}

func TestMalformed(t *testing.T) {
	for _, tc := range malformedCases {
		d := decoders[tc.decoder]
		path := d.path
		if tc.path != "" {
			path = tc.path
		}
		err := d.decode(path, []byte(tc.data))
		if !errors.Is(err, layout.ErrMalformed) || !strings.Contains(err.Error(), path+":") || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s %s %s: got %v; want ErrMalformed naming the path and saying %q", tc.decoder, path, tc.data, err, tc.why)
		}
	}
}

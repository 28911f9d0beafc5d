package layout

import (
	"encoding/base64"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// Every encoder writes the keys in one fixed order (the one in the package
// doc), so its bytes can be compared with golden files. Kafka writes them in
// a Java HashMap's order; no reader depends on the order.

// brokerJSON is /brokers/ids/<id>, version 5.
type brokerJSON struct {
	Version   int               `json:"version"`
	Host      *string           `json:"host"`
	Port      int32             `json:"port"`
	Endpoints []string          `json:"endpoints"`
	JMXPort   int               `json:"jmx_port"`
	Timestamp string            `json:"timestamp"`
	Rack      *string           `json:"rack,omitempty"`
	Protocols map[string]string `json:"listener_security_protocol_map"`
	Features  struct{}          `json:"features"`
}

// EncodeBroker encodes b's registration as Kafka 3.x does (version 5), with
// no JMX port: "endpoints" lists b.Listeners() as NAME://host:port, in
// order, "listener_security_protocol_map" names each one's protocol, and
// the top-level "host" and "port" are the first PLAINTEXT endpoint's, for
// readers older than listeners (null and -1 when there is none, as Kafka
// writes them). The rack key is left out when b.Rack is nil, as Kafka
// leaves it out. b.ID and b.Epoch are not encoded: the ID is the node's
// name, the epoch its czxid.
func EncodeBroker(b meta.Broker, timestampMs int64) []byte {
	j := brokerJSON{
		Version:   5,
		Port:      -1,
		JMXPort:   -1,
		Timestamp: strconv.FormatInt(timestampMs, 10),
		Rack:      b.Rack,
		Protocols: map[string]string{},
	}
	for _, e := range b.Listeners() {
		j.Endpoints = append(j.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.FormatInt(int64(e.Port), 10)))
		j.Protocols[e.Listener] = e.Protocol
		if e.Protocol == "PLAINTEXT" && j.Host == nil {
			j.Host, j.Port = &e.Host, e.Port
		}
	}
	return marshal(j)
}

// securityProtocols are Kafka's four security protocols.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// DecodeBroker decodes a registration at path (/brokers/ids/<id>): the ID
// comes from the path, Epoch is st.Czxid. It reads versions 1 to 5.
// Endpoints are every listener of "endpoints", each with its protocol from
// "listener_security_protocol_map" (a listener named as a protocol needs
// no entry, as when Kafka's map is absent); version 1 has none, only a
// PLAINTEXT "host" and "port". Host and Port are the top-level "host" and
// "port"; where host is null (Kafka's registration of a broker without a
// PLAINTEXT listener), they come from "endpoints": the first PLAINTEXT
// one, else the first.
func DecodeBroker(path string, data []byte, st coord.Stat) (meta.Broker, error) {
	if coord.Parent(path) != BrokerIDsPath {
		return meta.Broker{}, malformed(path, "not a broker registration (want %s/<id>)", BrokerIDsPath)
	}
	id, ok := parseID(path[len(BrokerIDsPath)+1:])
	if !ok {
		return meta.Broker{}, malformed(path, "the node's name is not a broker id")
	}
	o, err := parseObject(path, data)
	if err != nil {
		return meta.Broker{}, err
	}
	b := meta.Broker{ID: id, Epoch: st.Czxid}
	version, err := o.int32("version", 1, 5)
	if err != nil {
		return meta.Broker{}, err
	}
	if _, err := o.int32("jmx_port", math.MinInt32, math.MaxInt32); err != nil {
		return meta.Broker{}, err
	}
	if b.Rack, err = o.strOrNull("rack"); err != nil {
		return meta.Broker{}, err
	}
	if o.has("timestamp") {
		if _, err := o.str("timestamp"); err != nil {
			return meta.Broker{}, err
		}
	}
	if o.has("features") {
		if _, err := o.obj("features"); err != nil {
			return meta.Broker{}, err
		}
	}
	protocols := map[string]string{}
	if o.has("listener_security_protocol_map") {
		m, err := o.obj("listener_security_protocol_map")
		if err != nil {
			return meta.Broker{}, err
		}
		for _, k := range m.keys {
			if protocols[k], err = m.str(k); err != nil {
				return meta.Broker{}, err
			}
			if !slices.Contains(securityProtocols, protocols[k]) {
				return meta.Broker{}, malformed(path, "%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, have %s",
					m.name(k), show(quote(protocols[k])))
			}
		}
	}
	var endpoints []string
	if version >= 2 || o.has("endpoints") {
		if endpoints, err = o.strings("endpoints"); err != nil {
			return meta.Broker{}, err
		}
	}
	host, err := o.strOrNull("host")
	if err != nil {
		return meta.Broker{}, err
	}
	if version == 1 && host == nil {
		return meta.Broker{}, o.wrongType("host", "a string (version 1)")
	}
	if host != nil && *host != "" {
		if b.Port, err = o.int32("port", 1, math.MaxUint16); err != nil {
			return meta.Broker{}, err
		}
		b.Host = *host
	} else if o.has("port") {
		if _, err := o.int32("port", -1, math.MaxUint16); err != nil {
			return meta.Broker{}, err
		}
	}
	if version == 1 && b.Host == "" {
		return meta.Broker{}, malformed(path, "no address: \"host\" is empty (version 1)")
	}
	if version == 1 {
		// Kafka reads a version 1 registration as one PLAINTEXT listener,
		// whatever "endpoints" a later writer may have added.
		b.Endpoints = []meta.Endpoint{{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
		return b, nil
	}
	// Every endpoint is checked; the address is the first PLAINTEXT one
	// with a host, else the first with a host, unless "host" gave it.
	plaintext := false
	for i, e := range endpoints {
		listener, h, p, ok := parseEndpoint(e)
		if !ok {
			return meta.Broker{}, malformed(path, "\"endpoints\"[%d]: want LISTENER://host:port, have %s", i, show([]byte(e)))
		}
		proto, ok := protocols[listener]
		if !ok {
			if !slices.Contains(securityProtocols, listener) {
				return meta.Broker{}, malformed(path, "\"endpoints\"[%d]: listener %s has no security protocol in \"listener_security_protocol_map\"", i, listener)
			}
			proto = listener // Kafka's rule when the map is absent
		}
		if _, dup := b.Endpoint(listener); dup && len(b.Endpoints) > 0 {
			return meta.Broker{}, malformed(path, "\"endpoints\"[%d]: listener %s appears twice", i, listener)
		}
		b.Endpoints = append(b.Endpoints, meta.Endpoint{Listener: listener, Protocol: proto, Host: h, Port: p})
		if h == "" || host != nil && *host != "" || plaintext {
			continue
		}
		if proto == "PLAINTEXT" || b.Host == "" {
			b.Host, b.Port, plaintext = h, p, proto == "PLAINTEXT"
		}
	}
	if b.Host == "" {
		return meta.Broker{}, malformed(path, "no address: \"host\" is null or empty and no endpoint has a host")
	}
	if len(b.Endpoints) == 0 {
		// A version 2-5 registration with "host" and no endpoints: its
		// top-level address is a PLAINTEXT listener.
		b.Endpoints = []meta.Endpoint{{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
	}
	return b, nil
}

// parseEndpoint reads Kafka's "LISTENER://host:port" (host in brackets
// when it is an IPv6 address).
func parseEndpoint(s string) (listener, host string, port int32, ok bool) {
	listener, hostport, found := strings.Cut(s, "://")
	if !found || !validListener(listener) {
		return "", "", 0, false
	}
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", "", 0, false
	}
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil || p < 1 || p > math.MaxUint16 {
		return "", "", 0, false
	}
	return listener, host, int32(p), true
}

// validListener reports whether name is a listener name: letters, digits
// and '_' (what Kafka's listener settings can carry through a
// comma-separated NAME://host:port list and a NAME:PROTOCOL map).
func validListener(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validHost reports whether h is a host Kafka can read back from an
// endpoint: its EndPoint regex allows [0-9a-zA-Z-%._:] (':' for IPv6,
// which is then bracketed).
func validHost(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-%._:", c) >= 0) {
			return false
		}
	}
	return true
}

// EncodeAssignment encodes a topic's assignment (version 3). The topic_id
// key is left out when id is zero, as Kafka leaves it out for a topic
// without an id. Partitions are written in order.
func EncodeAssignment(id [16]byte, assignment [][]int32) []byte {
	b := []byte(`{"version":3,"partitions":{`)
	for p, replicas := range assignment {
		if p > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(p), 10)
		b = append(b, `":`...)
		b = appendInts(b, replicas)
	}
	b = append(b, `},"adding_replicas":{},"removing_replicas":{}`...)
	if id != ([16]byte{}) {
		b = append(b, `,"topic_id":"`...)
		b = append(b, EncodeTopicID(id)...)
		b = append(b, '"')
	}
	return append(b, '}')
}

func appendInts(b []byte, ns []int32) []byte {
	b = append(b, '[')
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, ']')
}

// EncodeTopicID is Kafka's Uuid.toString: base64url without padding, 22
// characters.
func EncodeTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// DecodeTopicID reads EncodeTopicID's form, strictly: 22 characters of the
// URL-safe alphabet, in canonical form (what Kafka writes).
func DecodeTopicID(s string) ([16]byte, bool) {
	var id [16]byte
	if len(s) != 22 {
		return id, false
	}
	n, err := base64.RawURLEncoding.Strict().Decode(id[:], []byte(s))
	return id, err == nil && n == 16
}

// DecodeAssignment decodes /brokers/topics/<t>, versions 1 to 3. Partitions
// must be 0..n-1 (n >= 1), each once, each with one or more distinct
// replicas >= 0. Versions 1 and 2, and a version 3 without topic_id, give a
// zero id. adding_replicas and removing_replicas (a reassignment in
// progress, which weir does not do) are checked for shape and ignored.
func DecodeAssignment(path string, data []byte) (id [16]byte, assignment [][]int32, err error) {
	o, err := parseObject(path, data)
	if err != nil {
		return id, nil, err
	}
	if _, err := o.int32("version", 1, 3); err != nil {
		return id, nil, err
	}
	parts, err := o.obj("partitions")
	if err != nil {
		return id, nil, err
	}
	n := len(parts.keys)
	if n == 0 {
		return id, nil, malformed(path, "%s: no partitions", o.name("partitions"))
	}
	assignment = make([][]int32, n)
	for _, k := range parts.keys {
		p, ok := parseID(k)
		if !ok || int(p) >= n {
			return id, nil, malformed(path, "%s: want partitions 0 to %d, have %q", o.name("partitions"), n-1, k)
		}
		if assignment[p], err = parts.ids(k); err != nil {
			return id, nil, err
		}
		if len(assignment[p]) == 0 {
			return id, nil, malformed(path, "%s: no replicas", parts.name(k))
		}
	}
	for _, key := range []string{"adding_replicas", "removing_replicas"} {
		if !o.has(key) {
			continue
		}
		r, err := o.obj(key)
		if err != nil {
			return id, nil, err
		}
		for _, k := range r.keys {
			if _, ok := parseID(k); !ok {
				return id, nil, malformed(path, "%s: %q is not a partition", o.name(key), k)
			}
			if _, err := r.ids(k); err != nil {
				return id, nil, err
			}
		}
	}
	if o.has("topic_id") {
		s, err := o.str("topic_id")
		if err != nil {
			return id, nil, err
		}
		var ok bool
		if id, ok = DecodeTopicID(s); !ok {
			return [16]byte{}, nil, malformed(path, "\"topic_id\": want 22 characters of base64url (a Kafka Uuid), have %s", show([]byte(s)))
		}
	}
	return id, assignment, nil
}

// stateJSON is …/partitions/<p>/state, version 1.
type stateJSON struct {
	Version         int     `json:"version"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ControllerEpoch int32   `json:"controller_epoch"`
	ISR             []int32 `json:"isr"`
}

// EncodeState encodes a partition state (version 1). s.Version is not
// encoded: it is the node's version.
func EncodeState(s meta.PartitionState) []byte {
	isr := s.ISR
	if isr == nil {
		isr = []int32{}
	}
	return marshal(stateJSON{Version: 1, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
		ControllerEpoch: s.ControllerEpoch, ISR: isr})
}

// DecodeState decodes a partition state; Version is st.Version. The leader
// is a broker id or -1; epochs are >= 0; the ISR's members are distinct.
// Kafka's "leader_recovery_state" (1 while a leader elected uncleanly
// recovers, KIP-704) is checked and ignored: weir has no such state.
func DecodeState(path string, data []byte, st coord.Stat) (meta.PartitionState, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return meta.PartitionState{}, err
	}
	s := meta.PartitionState{Version: st.Version}
	if _, err := o.int32("version", 1, 1); err != nil {
		return s, err
	}
	if s.Leader, err = o.int32("leader", meta.NoLeader, math.MaxInt32); err != nil {
		return s, err
	}
	if s.LeaderEpoch, err = o.int32("leader_epoch", 0, math.MaxInt32); err != nil {
		return s, err
	}
	if s.ControllerEpoch, err = o.int32("controller_epoch", 0, math.MaxInt32); err != nil {
		return s, err
	}
	if s.ISR, err = o.ids("isr"); err != nil {
		return s, err
	}
	if o.has("leader_recovery_state") {
		if _, err := o.int32("leader_recovery_state", 0, 1); err != nil {
			return s, err
		}
	}
	return s, nil
}

// EncodeTopicConfig encodes a topic's configs (version 1); keys sorted.
func EncodeTopicConfig(cfg map[string]string) []byte {
	if cfg == nil {
		cfg = map[string]string{}
	}
	return marshal(struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}{1, cfg})
}

// DecodeTopicConfig decodes /config/topics/<t>: string values only. The
// result is never nil.
func DecodeTopicConfig(path string, data []byte) (map[string]string, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return nil, err
	}
	if _, err := o.int32("version", 1, 1); err != nil {
		return nil, err
	}
	c, err := o.obj("config")
	if err != nil {
		return nil, err
	}
	cfg := make(map[string]string, len(c.keys))
	for _, k := range c.keys {
		if cfg[k], err = c.str(k); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// EncodeController encodes /controller (version 2, a ZooKeeper-mode
// controller: kraftControllerEpoch -1).
func EncodeController(id int32, timestampMs int64) []byte {
	return marshal(struct {
		Version    int    `json:"version"`
		BrokerID   int32  `json:"brokerid"`
		Timestamp  string `json:"timestamp"`
		KRaftEpoch int    `json:"kraftControllerEpoch"`
	}{2, id, strconv.FormatInt(timestampMs, 10), -1})
}

// DecodeController decodes /controller, versions 1 and 2: the controller's
// broker id.
func DecodeController(path string, data []byte) (int32, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return 0, err
	}
	if _, err := o.int32("version", 1, 2); err != nil {
		return 0, err
	}
	if o.has("timestamp") {
		if _, err := o.str("timestamp"); err != nil {
			return 0, err
		}
	}
	if o.has("kraftControllerEpoch") {
		if _, err := o.int32("kraftControllerEpoch", -1, math.MaxInt32); err != nil {
			return 0, err
		}
	}
	return o.int32("brokerid", 0, math.MaxInt32)
}

// EncodeControllerEpoch encodes /controller_epoch: a plain decimal.
func EncodeControllerEpoch(epoch int32) []byte {
	return strconv.AppendInt(nil, int64(epoch), 10)
}

// DecodeControllerEpoch decodes /controller_epoch: a canonical decimal
// int32 >= 0, nothing else.
func DecodeControllerEpoch(path string, data []byte) (int32, error) {
	e, ok := parseID(string(data))
	if !ok {
		return 0, malformed(path, "want a decimal epoch >= 0, have %s", show(data))
	}
	return e, nil
}

// ProducerIDBlock is /latest_producer_id_block: the last block of producer
// ids handed out, [First, Last], and the broker it went to.
type ProducerIDBlock struct {
	Broker      int32
	First, Last int64
}

// EncodeProducerIDBlock encodes a block as Kafka's ProducerIdBlockZNode
// (version 1; the bounds as strings).
func EncodeProducerIDBlock(b ProducerIDBlock) []byte {
	return marshal(struct {
		Version int    `json:"version"`
		Broker  int32  `json:"broker"`
		Start   string `json:"block_start"`
		End     string `json:"block_end"`
	}{1, b.Broker, strconv.FormatInt(b.First, 10), strconv.FormatInt(b.Last, 10)})
}

// DecodeProducerIDBlock decodes /latest_producer_id_block: 0 <= First <=
// Last.
func DecodeProducerIDBlock(path string, data []byte) (ProducerIDBlock, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return ProducerIDBlock{}, err
	}
	var b ProducerIDBlock
	if _, err := o.int32("version", 1, 1); err != nil {
		return b, err
	}
	if b.Broker, err = o.int32("broker", math.MinInt32, math.MaxInt32); err != nil {
		return b, err
	}
	bound := func(key string) (int64, error) {
		s, err := o.str(key)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
			return 0, malformed(path, "%s: want a decimal int64 >= 0 in a string, have %s", o.name(key), show([]byte(s)))
		}
		return n, nil
	}
	if b.First, err = bound("block_start"); err != nil {
		return b, err
	}
	if b.Last, err = bound("block_end"); err != nil {
		return b, err
	}
	if b.Last < b.First {
		return b, malformed(path, "block_end %d before block_start %d", b.Last, b.First)
	}
	return b, nil
}

// EncodeClusterID encodes /cluster/id: {"version":"1","id":...} (the
// version is a string, as Kafka writes it).
func EncodeClusterID(id string) []byte {
	return marshal(struct {
		Version string `json:"version"`
		ID      string `json:"id"`
	}{"1", id})
}

// DecodeClusterID decodes /cluster/id: a non-empty id.
func DecodeClusterID(path string, data []byte) (string, error) {
	o, err := parseObject(path, data)
	if err != nil {
		return "", err
	}
	v, err := o.str("version")
	if err != nil {
		return "", err
	}
	if v != "1" {
		return "", malformed(path, "unsupported version %q", v)
	}
	id, err := o.str("id")
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", malformed(path, "\"id\" is empty")
	}
	return id, nil
}

// checkAssignment checks what CreateTopic would write, with DecodeAssignment's
// rules.
func checkAssignment(asg [][]int32) bool {
	if len(asg) == 0 {
		return false
	}
	for _, r := range asg {
		if len(r) == 0 {
			return false
		}
		for i, b := range r {
			if b < 0 || slices.Contains(r[:i], b) {
				return false
			}
		}
	}
	return true
}

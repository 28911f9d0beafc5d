package spec

import (
	"strings"
	"testing"
)

// security_protocol is a factor: it comes first in point IDs, sets the
// point's workload, and is checked against the target.
func TestSecurityProtocolFactor(t *testing.T) {
	s := mustParse(t, `
name: sec
target: {embedded: {}}
factors:
  codec: [none, zstd]
  security_protocol: [PLAINTEXT, SSL, SASL_SSL]
baseline: security_protocol=PLAINTEXT/codec=none
`)
	if err := s.Validate(fakePlugins{}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range secs[0].Points {
		ids = append(ids, p.ID)
		if want, _, _ := strings.Cut(strings.TrimPrefix(p.ID, "security_protocol="), "/"); p.Workload.SecurityProtocol != want {
			t.Errorf("%s: workload security_protocol %q", p.ID, p.Workload.SecurityProtocol)
		}
	}
	want := "security_protocol=PLAINTEXT/codec=none security_protocol=PLAINTEXT/codec=zstd security_protocol=SSL/codec=none " +
		"security_protocol=SSL/codec=zstd security_protocol=SASL_SSL/codec=none security_protocol=SASL_SSL/codec=zstd"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("points %s\nwant %s", got, want)
	}
	if got := strings.Join(secs[0].Factors, ","); got != "security_protocol,codec" {
		t.Errorf("factors %s", got)
	}
	if d := Defaults(); d.Workload.SecurityProtocol != "PLAINTEXT" {
		t.Errorf("default security_protocol %q", d.Workload.SecurityProtocol)
	}

	// A cluster target takes the factor: the runner gives every broker the
	// point's listener.
	cs := mustParse(t, "name: sec\ntarget: {cluster: {brokers: 3}}\nworkload: {replication_factor: 3}\n"+
		"points: [{security_protocol: PLAINTEXT}, {security_protocol: SSL}, {security_protocol: SASL_PLAINTEXT}, {security_protocol: SASL_SSL}]\n")
	if err := cs.Validate(fakePlugins{}); err != nil {
		t.Errorf("a cluster target with security_protocol points: %v", err)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"target: {embedded: {}}\nfactors: {security_protocol: [PLAINTEXT, TLS]}",
			`factors.security_protocol[1]: unknown security protocol "TLS" (known: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)`},
		{"target: {bootstrap: \"127.0.0.1:9092\"}\nworkload: {security_protocol: SSL}",
			"workload.security_protocol: SSL: the runner sets up listeners only on a broker it starts"},
		{"target: {cluster: {brokers: 3}}\ndurability: {}\npoints: [{security_protocol: SASL_SSL}]",
			"points[0].security_protocol: SASL_SSL: load experiments only"},
		{"target: {embedded: {}}\ndurability: {}\nfactors: {security_protocol: [SSL]}",
			"factors.security_protocol[0]: SSL: load experiments only"},
		{"target: {embedded: {}}\nfactors: {security_protocol: [SSL, SSL]}",
			"factors.security_protocol[1]: repeats level 0 (SSL)"},
		{"target: {cluster: {brokers: 1}}\ninterleave: true", "interleave: not on a cluster target"},
		{"target: {embedded: {}}\ninterleave: true\ndurability: {}", "interleave: load experiments only"},
	} {
		s := mustParse(t, "name: bad\n"+tc.yaml+"\n")
		if err := s.Validate(fakePlugins{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

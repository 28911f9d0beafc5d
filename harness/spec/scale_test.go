package spec

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestScaleSections(t *testing.T) {
	s := mustParse(t, "name: s\nrepetitions: 1\ntarget: {embedded: {open_files_limit: 20000, broker_env: [GOGC=200]}}\n"+
		"workload: {partitions: 4}\nscale: {partitions: [1000, 250], partitions_per_topic: 100, restarts: 1}\n")
	if err := s.Validate(nil); err != nil {
		t.Fatal(err)
	}
	sc := s.Scale
	def := DefaultScale()
	if sc.Restarts != 1 || sc.CreateBatch != def.CreateBatch || sc.SessionPartitions != 10000 || sc.SessionWindow != 5*time.Second ||
		sc.HotRounds != 3 || sc.MetadataRequests != 20 || sc.RestartTimeout != 5*time.Minute {
		t.Fatalf("scale block with defaults = %+v", sc)
	}
	if e := s.Target.Embedded; e.OpenFilesLimit != 20000 || strings.Join(e.BrokerEnv, ",") != "GOGC=200" {
		t.Fatalf("embedded = %+v", e)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].Name != SectionScale || strings.Join(secs[0].Factors, ",") != FactorTotalPartitions || len(secs[0].Points) != 2 {
		t.Fatalf("sections = %+v", secs)
	}
	for i, want := range []int{1000, 250} {
		p := secs[0].Points[i]
		if p.TotalPartitions != want || p.ID != FactorTotalPartitions+"="+map[int]string{1000: "1000", 250: "250"}[want] || p.Workload.Partitions != 4 {
			t.Errorf("point %d = %+v", i, p)
		}
	}
	if sc.Topics(1000) != 10 || sc.Topics(250) != 3 || sc.Topics(1) != 1 {
		t.Errorf("Topics: %d %d %d", sc.Topics(1000), sc.Topics(250), sc.Topics(1))
	}
	var out bytes.Buffer
	if err := s.WriteMatrix(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"target embedded broker, open-file limit 20000, env GOGC=200", "scale: partitions 1000, 250, in topics of 100",
		"1 clean and 1 unclean restarts", "  2. total_partitions=250\n     250 partitions in 3 topics; hot load (step 7): topics=1 partitions=4"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, out.String())
		}
	}
}

func TestScaleValidateErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no partitions", "scale: {}", []string{"scale.partitions: required"}},
		{"bad counts", "scale: {partitions: [0, 10, 10, 2000000]}", []string{"scale.partitions[0]: must be in 1..1000000, got 0",
			"scale.partitions[2]: repeats level 1 (10)", "scale.partitions[3]: must be in 1..1000000, got 2000000"}},
		{"bootstrap target", "target: {bootstrap: a:1}\nscale: {partitions: [10]}", []string{"scale: only for embedded targets"}},
		{"cluster target", "target: {cluster: {brokers: 3}}\nscale: {partitions: [10]}", []string{"scale: only for embedded targets"}},
		{"with durability", "durability: {}\nworkload: {message_size: 64}\nscale: {partitions: [10]}", []string{"scale: a spec is a scale or a durability experiment, not both"}},
		{"with factors", "factors: {codec: [none, zstd]}\nscale: {partitions: [10]}", []string{"scale: a scale experiment varies scale.partitions only"}},
		{"with baseline", "baseline: x\nscale: {partitions: [10]}", []string{"baseline: not for scale experiments"}},
		{"ranges", "scale: {partitions: [10], partitions_per_topic: 0, create_batch: 0, metadata_requests: 0, restarts: -1, " +
			"restart_timeout: 0s, step_timeout: -1s, request_timeout: 0s, session_partitions: -1, hot_rounds: 101}", []string{
			"scale.partitions_per_topic: must be in 1..10000, got 0", "scale.create_batch: must be in 1..10000 topics per request, got 0",
			"scale.metadata_requests: must be in 1..10000, got 0", "scale.restarts: must be in 0..100, got -1",
			"scale.restart_timeout: must be > 0, got 0s", "scale.step_timeout: must be > 0, got -1s", "scale.request_timeout: must be > 0, got 0s",
			"scale.session_partitions: must be in 0..1000000", "scale.hot_rounds: must be in 0..100, got 101"}},
		{"session step", "scale: {partitions: [10], session_window: 0s, session_rate: 0, session_hot: 0}", []string{
			"scale.session_window: must be > 0", "scale.session_rate: must be in (0, 100000]", "scale.session_hot: must be >= 1"}},
		{"hot load without consumers", "workload: {consumers: 0}\nscale: {partitions: [10]}", []string{"workload.consumers: the hot load of a scale experiment produces and fetches"}},
		{"open files limit", "target: {embedded: {open_files_limit: 10}}", []string{"target.embedded.open_files_limit: must be 0 (the runner's limit) or in 64..1048576, got 10"}},
		{"broker env", "target: {embedded: {broker_env: [GOGC, \"=1\", \"A B=2\"]}}", []string{`target.embedded.broker_env[0]: "GOGC": want NAME=value`,
			`target.embedded.broker_env[1]: "=1"`, `target.embedded.broker_env[2]: "A B=2"`}},
		{"limit with durability", "target: {embedded: {open_files_limit: 1000}}\ndurability: {}\nworkload: {message_size: 64}", []string{
			"target.embedded: broker_env and open_files_limit are for load and scale experiments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, "name: v\n"+tc.yaml+"\n")
			err := s.Validate(nil)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// A misspelt scale field is an error naming it and its block, not a
// default silently kept.
func TestScaleUnknownField(t *testing.T) {
	_, err := Parse([]byte("name: v\nscale:\n  partitions: [10]\n  restart: 3\n"), "")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `line 4: unknown field "restart" in scale`) {
		t.Fatalf("Parse = %v", err)
	}
}

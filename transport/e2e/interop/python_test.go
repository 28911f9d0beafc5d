package interop_test

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// pythonWith returns a Python interpreter that imports module, which the
// Debian package pkg provides. Debian installs it for /usr/bin/python3, tried
// first: a pyenv or venv python3 earlier on PATH does not see it.
func pythonWith(t *testing.T, module, pkg string) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "import "+module).Run() == nil {
			return py
		}
	}
	missing(t, "no python3 imports "+module, "apt-get install "+pkg)
	return ""
}

// runPython returns a client's run: script (in testdata/python) with the
// broker's address, the operation and the topic.
func runPython(py, script string) func(t *testing.T, addr, op, topic string) {
	return func(t *testing.T, addr, op, topic string) {
		run(t, "", py, filepath.Join("testdata", "python", script), addr, op, topic)
	}
}

// TestKafkaPython: kafka-python 2.0.2 (Debian python3-kafka) runs every
// operation it has an API for.
func TestKafkaPython(t *testing.T) {
	py := pythonWith(t, "kafka", "python3-kafka")
	runClient(t, client{
		name: "kafka-python",
		run:  runPython(py, "kafka_python_ops.py"),
	})
}

// TestConfluentKafka: confluent-kafka 1.7.0 (Debian python3-confluent-kafka,
// on librdkafka 2.0.2) runs every operation it has an API for.
func TestConfluentKafka(t *testing.T) {
	py := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	runClient(t, client{
		name: "confluent-kafka",
		run:  runPython(py, "confluent_ops.py"),
	})
}

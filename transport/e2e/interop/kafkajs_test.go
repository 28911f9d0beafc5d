package interop_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// kafkajsDir holds package.json (KafkaJS 2.2.4), its committed
// package-lock.json and ops.js.
var kafkajsDir = filepath.Join("testdata", "kafkajs")

// kafkajs returns node, first running `npm ci` in kafkajsDir when its
// node_modules is missing (npm reaches the registry; the lock pins every
// package).
func kafkajs(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node not found", "apt-get install nodejs npm")
	}
	if _, err := os.Stat(filepath.Join(kafkajsDir, "node_modules", "kafkajs", "package.json")); err == nil {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing(t, "npm not found, and "+kafkajsDir+"/node_modules is missing", "apt-get install npm")
	}
	run(t, kafkajsDir, npm, "ci", "--no-audit", "--no-fund")
	return node
}

// TestKafkaJS: KafkaJS 2.2.4 (npm) runs every operation it has an API for.
func TestKafkaJS(t *testing.T) {
	node := kafkajs(t)
	runClient(t, client{
		name: "KafkaJS",
		run: func(t *testing.T, addr, op, topic string) {
			run(t, kafkajsDir, node, "ops.js", addr, op, topic)
		},
	})
}

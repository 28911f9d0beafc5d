package pluginrpc

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogGoesToSlogAtDebug(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var h hclog.Logger = newHCLogAdapter(l)
	h.Named("stdio").With("pid", 7).Error("plugin crashed", "code", 3)
	h.StandardLogger(nil).Print("from the standard logger")
	_, _ = (&logWriter{l: l, stream: "stdout"}).Write([]byte("line one\nline two\n"))
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="plugin crashed" pid=7 hclog_level=error hclog_name=stdio code=3`,
		`msg="from the standard logger"`,
		`msg="line one" stream=stdout`,
		`msg="line two" stream=stdout`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}

	buf.Reset()
	quiet := newHCLogAdapter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	quiet.Error("hidden")
	if buf.Len() != 0 || quiet.IsError() || quiet.GetLevel() != hclog.Off {
		t.Errorf("at info level the adapter still logs: %q", buf.String())
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{Path: "/x"}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.CallTimeout != DefaultCallTimeout || c.StartTimeout != DefaultStartTimeout ||
		c.MaxRestarts != DefaultMaxRestarts || c.RestartWindow != DefaultRestartWindow || c.Logger == nil || c.Clock == nil {
		t.Errorf("defaults not filled: %+v", c)
	}
	for _, bad := range []Config{{}, {Path: "/x", CallTimeout: -1}, {Path: "/x", RestartWindow: -1}} {
		if err := bad.validate(); err == nil {
			t.Errorf("validate(%+v) accepted it", bad)
		}
	}
}

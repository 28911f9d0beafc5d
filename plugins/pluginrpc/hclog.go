package pluginrpc

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter is the hclog.Logger go-plugin logs through on the host side:
// its own events and each line the plugin writes to stderr (a Go plugin's
// hclog output, JSON-decoded by go-plugin). Everything goes to slog at debug
// level: the supervisor logs what the broker's operator needs (start, exit,
// kill, restart) itself, at info and warn.
type hclogAdapter struct {
	l    *slog.Logger
	name string
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogAdapter(l *slog.Logger) *hclogAdapter { return &hclogAdapter{l: l} }

func (h *hclogAdapter) enabled() bool { return h.l.Enabled(context.Background(), slog.LevelDebug) }

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if !h.enabled() {
		return
	}
	attrs := make([]any, 0, len(args)+4)
	attrs = append(attrs, "hclog_level", level.String())
	if h.name != "" {
		attrs = append(attrs, "hclog_name", h.name)
	}
	h.l.Debug(msg, append(attrs, args...)...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) IsTrace() bool { return h.enabled() }
func (h *hclogAdapter) IsDebug() bool { return h.enabled() }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled() }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled() }
func (h *hclogAdapter) IsError() bool { return h.enabled() }

func (h *hclogAdapter) ImpliedArgs() []any { return nil }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: h.l.With(args...), name: h.name}
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hclogAdapter{l: h.l, name: name}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger { return &hclogAdapter{l: h.l, name: name} }

// SetLevel is ignored: slog's handler decides what is shown.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	if h.enabled() {
		return hclog.Trace
	}
	return hclog.Off
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &logWriter{l: h.l, stream: "log"}
}

// logWriter logs what a plugin writes to its redirected stdout or stderr
// (go-plugin's stdio stream), one debug record per line.
type logWriter struct {
	l      *slog.Logger
	stream string
}

func (w *logWriter) Write(p []byte) (int, error) {
	if w.l.Enabled(context.Background(), slog.LevelDebug) {
		for line := range bytes.SplitSeq(bytes.TrimRight(p, "\n"), []byte("\n")) {
			w.l.Debug(string(line), "stream", w.stream)
		}
	}
	return len(p), nil
}

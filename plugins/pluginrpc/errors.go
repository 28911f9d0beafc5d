package pluginrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of the supervisor. Calls wrap them together with the kind's
// ErrPluginFailed, so errors.Is works with either.
var (
	// ErrStart: the plugin process did not start: the binary is missing or
	// not executable, it exited or printed something other than go-plugin's
	// handshake, or it did not finish the handshake within the start timeout.
	ErrStart = errors.New("pluginrpc: plugin did not start")
	// ErrExited: the plugin process died (exited, crashed, was killed) before
	// or during a call.
	ErrExited = errors.New("pluginrpc: plugin process exited")
	// ErrHung: a call outlived its deadline; the supervisor killed the
	// process.
	ErrHung = errors.New("pluginrpc: plugin call timed out")
	// ErrRestartLimit: the plugin failed again after as many restarts as the
	// restart window allows; calls fail fast until the window has passed.
	ErrRestartLimit = errors.New("pluginrpc: plugin restart limit reached")
	// ErrClosed: the supervisor or the instance was closed.
	ErrClosed = errors.New("pluginrpc: plugin closed")
	// ErrNotServed: the plugin binary does not serve the requested kind.
	ErrNotServed = errors.New("pluginrpc: plugin does not serve this kind")
	// ErrUnknownInstance: a call named an instance the plugin does not have
	// (returned by the plugin side; the host never sends stale ids).
	ErrUnknownInstance = errors.New("pluginrpc: unknown plugin instance")
	// ErrIncompatible: re-opened after a restart, the plugin's instance
	// answered differently from the first time (another codec id, another
	// loss bound), which callers already rely on. The instance then fails
	// for good, without re-opening at every call; open a new one.
	ErrIncompatible = errors.New("pluginrpc: plugin instance changed across a restart")
)

// Kind describes one plugin kind to the shared machinery: its go-plugin name
// and the sentinels its errors wrap.
type Kind struct {
	// Name is the go-plugin plugin name: KindCodec, KindPartitioner or
	// KindFlushPolicy.
	Name string
	// ErrFailed is the kind's ErrPluginFailed; every failure of the plugin
	// (process, deadline, error answer, garbage) wraps it.
	ErrFailed error
	// ErrInvalid is the kind's ErrInvalidSpec: Open rejected the parameters.
	ErrInvalid error
	// Codes lists the kind's other sentinels and the gRPC codes that carry
	// them across the process boundary (codec.ErrCorrupt as DataLoss, ...).
	// Each code appears once and none is a code this package uses itself
	// (InvalidArgument, NotFound, Canceled, DeadlineExceeded, Unavailable,
	// Unimplemented, Unknown) or that gRPC answers by itself
	// (ResourceExhausted: a message over the size limit; Internal).
	Codes []ErrorCode
}

// ErrorCode pairs a sentinel with the gRPC status code that carries it.
type ErrorCode struct {
	Err  error
	Code codes.Code
}

// ToStatus turns a plugin implementation's error into the gRPC status error
// the host decodes (plugin side): the first of kind.Codes the error wraps,
// InvalidArgument for kind.ErrInvalid (a factory's rejection), NotFound for
// ErrUnknownInstance, Canceled and DeadlineExceeded for ctx errors, Unknown
// for the rest. The message is err's text.
func ToStatus(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, c := range kind.Codes {
		if errors.Is(err, c.Err) {
			return status.Error(c.Code, err.Error())
		}
	}
	code := codes.Unknown
	switch {
	case kind.ErrInvalid != nil && errors.Is(err, kind.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrUnknownInstance):
		code = codes.NotFound
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

// fromStatus turns the error answer of a live plugin into the kind's error.
// Process failures (Unavailable, deadlines) are the supervisor's business and
// never reach here.
func fromStatus(kind Kind, name, op string, st *status.Status) error {
	msg := st.Message()
	for _, c := range kind.Codes {
		if st.Code() == c.Code {
			return fmt.Errorf("%w: plugin %s: %s: %s", c.Err, name, op, trimSentinel(msg, c.Err))
		}
	}
	switch st.Code() {
	case codes.InvalidArgument:
		if kind.ErrInvalid != nil {
			return fmt.Errorf("%w: plugin %s: %s rejected the parameters: %s", kind.ErrInvalid, name, op, trimSentinel(msg, kind.ErrInvalid))
		}
	case codes.Unimplemented:
		return fmt.Errorf("%w: %w: %s does not serve the %s kind (%s)", kind.ErrFailed, ErrNotServed, name, kind.Name, msg)
	case codes.NotFound:
		return fmt.Errorf("%w: %w: plugin %s: %s: %s", kind.ErrFailed, ErrUnknownInstance, name, op, msg)
	}
	return fmt.Errorf("%w: plugin %s: %s returned an error (%s): %s", kind.ErrFailed, name, op, st.Code(), msg)
}

// trimSentinel drops a leading "sentinel text: " that the plugin side's
// error already carried, so the host's message does not say it twice.
func trimSentinel(msg string, sentinel error) string {
	rest, ok := strings.CutPrefix(msg, sentinel.Error())
	if !ok {
		return msg
	}
	rest = strings.TrimPrefix(rest, ":")
	return strings.TrimPrefix(rest, " ")
}

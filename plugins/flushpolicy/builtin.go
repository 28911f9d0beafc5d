package flushpolicy

import (
	"context"
	"fmt"
	"github.com/weir-broker/weir/plugins/spec"
	"strconv"
	"time"
)

// The built-ins derive every answer from AppendInfo and keep no state, so one
// value could serve many logs; the log still builds one per partition because
// other policies may keep state. They ignore ctx: they do no I/O.

func init() {
	RegisterInfo(Info{
		Name:    "every-batch",
		Usage:   "every-batch",
		Example: "every-batch",
		Summary: "fsync after every append; a power cut loses nothing acknowledged",
	}, newEveryBatch)
	RegisterInfo(Info{
		Name:    "messages",
		Usage:   "messages:n=RECORDS",
		Example: "messages:n=1000",
		Summary: "fsync once n records are unflushed; a power cut loses < n acknowledged records",
	}, newEveryMessages)
	RegisterInfo(Info{
		Name:    "bytes",
		Usage:   "bytes:n=BYTES",
		Example: "bytes:n=1048576",
		Summary: "fsync once n bytes are unflushed; a power cut loses < n acknowledged bytes",
	}, newEveryBytes)
	RegisterInfo(Info{
		Name:    "interval",
		Usage:   "interval:ms=MILLIS | interval:d=DURATION",
		Example: "interval:ms=50",
		Summary: "fsync when the oldest unflushed append is d old; a power cut loses the last d of appends",
	}, newEveryInterval)
	RegisterInfo(Info{
		Name:    "never",
		Usage:   "never",
		Example: "never",
		Summary: "leave fsync to the OS (rolled segments and close still fsync); a power cut can lose the active segment",
	}, newNever)
}

// EveryBatch returns a policy that asks for an fsync after every append.
//
// Loss bound after a power cut: nothing the log acknowledged, because the
// append (and so its ack) returns only after its fsync. Spec: "every-batch".
func EveryBatch() Policy { return everyBatch{} }

type everyBatch struct{}

func (everyBatch) Appended(context.Context, AppendInfo) (Decision, error) {
	return Decision{Flush: true}, nil
}
func (everyBatch) Flushed(context.Context, FlushInfo) error { return nil }
func (everyBatch) String() string                           { return "every-batch" }

// EveryMessages returns a policy that asks for an fsync once at least n
// records are unflushed (AppendInfo.UnflushedMessages >= n). It panics if
// n <= 0.
//
// Loss bound after a power cut: fewer than n acknowledged records, since
// every append returns with fewer than n records unflushed. Appends are not
// split, so one fsync may cover far more than n records. Spec:
// "messages:n=1000".
func EveryMessages(n int64) Policy {
	if n <= 0 {
		panic(fmt.Sprintf("flushpolicy: EveryMessages(%d): n must be positive", n))
	}
	return everyMessages{n: n}
}

type everyMessages struct{ n int64 }

func (p everyMessages) Appended(_ context.Context, a AppendInfo) (Decision, error) {
	return Decision{Flush: a.UnflushedMessages >= p.n}, nil
}
func (everyMessages) Flushed(context.Context, FlushInfo) error { return nil }
func (p everyMessages) String() string                         { return "messages:n=" + strconv.FormatInt(p.n, 10) }

// EveryBytes returns a policy that asks for an fsync once at least n bytes
// are unflushed (AppendInfo.UnflushedBytes >= n). It panics if n <= 0.
//
// Loss bound after a power cut: fewer than n acknowledged bytes, since every
// append returns with fewer than n bytes unflushed. Spec: "bytes:n=1048576".
func EveryBytes(n int64) Policy {
	if n <= 0 {
		panic(fmt.Sprintf("flushpolicy: EveryBytes(%d): n must be positive", n))
	}
	return everyBytes{n: n}
}

type everyBytes struct{ n int64 }

func (p everyBytes) Appended(_ context.Context, a AppendInfo) (Decision, error) {
	return Decision{Flush: a.UnflushedBytes >= p.n}, nil
}
func (everyBytes) Flushed(context.Context, FlushInfo) error { return nil }
func (p everyBytes) String() string                         { return "bytes:n=" + strconv.FormatInt(p.n, 10) }

// EveryInterval returns a policy that asks for an fsync once the oldest
// unflushed append is at least d old (Now - OldestUnflushed >= d), and
// otherwise for an fsync by OldestUnflushed + d, so data is flushed on time
// even if no further append comes. It panics if d <= 0.
//
// Loss bound after a power cut: the appends acknowledged during the last d,
// plus those acknowledged while one fsync runs (the deadline fires, then the
// fsync takes its time). Spec: "interval:ms=50" or "interval:d=1.5ms".
func EveryInterval(d time.Duration) Policy {
	if d <= 0 {
		panic(fmt.Sprintf("flushpolicy: EveryInterval(%v): d must be positive", d))
	}
	return everyInterval{d: d}
}

type everyInterval struct{ d time.Duration }

func (p everyInterval) Appended(_ context.Context, a AppendInfo) (Decision, error) {
	// A zero OldestUnflushed makes the age huge: flush, the safe direction.
	if a.Now.Sub(a.OldestUnflushed) >= p.d {
		return Decision{Flush: true}, nil
	}
	by := a.OldestUnflushed.Add(p.d)
	// OldestUnflushed after Now (a caller mixing clocks) must not stretch the
	// bound: never promise later than Now + d.
	if latest := a.Now.Add(p.d); by.After(latest) {
		by = latest
	}
	return Decision{FlushBy: by}, nil
}
func (everyInterval) Flushed(context.Context, FlushInfo) error { return nil }
func (p everyInterval) String() string {
	if p.d%time.Millisecond == 0 {
		return "interval:ms=" + strconv.FormatInt(int64(p.d/time.Millisecond), 10)
	}
	return "interval:d=" + p.d.String()
}

// Never returns a policy that never asks for an fsync: the operating system's
// writeback decides, and the log still fsyncs a segment when it rolls and
// when it closes.
//
// Loss bound after a power cut: the active segment of each partition, since
// nothing in it need have reached the disk. Spec: "never".
func Never() Policy { return never{} }

type never struct{}

func (never) Appended(context.Context, AppendInfo) (Decision, error) { return Decision{}, nil }
func (never) Flushed(context.Context, FlushInfo) error               { return nil }
func (never) String() string                                         { return "never" }

// Factories: params were split by New; each rejects what it does not know.

func newEveryBatch(params map[string]string) (Policy, error) {
	if err := onlyParams(params); err != nil {
		return nil, err
	}
	return EveryBatch(), nil
}

func newNever(params map[string]string) (Policy, error) {
	if err := onlyParams(params); err != nil {
		return nil, err
	}
	return Never(), nil
}

func newEveryMessages(params map[string]string) (Policy, error) {
	n, err := positiveIntParam(params, "n", "messages:n=1000")
	if err != nil {
		return nil, err
	}
	return EveryMessages(n), nil
}

func newEveryBytes(params map[string]string) (Policy, error) {
	n, err := positiveIntParam(params, "n", "bytes:n=1048576")
	if err != nil {
		return nil, err
	}
	return EveryBytes(n), nil
}

func newEveryInterval(params map[string]string) (Policy, error) {
	if err := onlyParams(params, "ms", "d"); err != nil {
		return nil, err
	}
	ms, hasMS := params["ms"]
	ds, hasD := params["d"]
	var d time.Duration
	switch {
	case hasMS && hasD:
		return nil, fmt.Errorf("give ms or d, not both")
	case hasMS:
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("ms=%q: want a positive whole number of milliseconds (or d=DURATION, e.g. d=1.5ms)", ms)
		}
		if n > int64(time.Duration(1<<63-1)/time.Millisecond) {
			return nil, fmt.Errorf("ms=%q: too long", ms)
		}
		d = time.Duration(n) * time.Millisecond
	case hasD:
		v, err := time.ParseDuration(ds)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("d=%q: want a positive duration such as 50ms or 1.5ms", ds)
		}
		d = v
	default:
		return nil, fmt.Errorf("missing parameter ms or d (e.g. \"interval:ms=50\")")
	}
	return EveryInterval(d), nil
}

// onlyParams rejects any parameter not in known.
func onlyParams(params map[string]string, known ...string) error {
	return spec.OnlyParams(params, known...)
}

// positiveIntParam returns the required parameter key, the only one allowed,
// as a positive int64.
func positiveIntParam(params map[string]string, key, example string) (int64, error) {
	if err := onlyParams(params, key); err != nil {
		return 0, err
	}
	s, ok := params[key]
	if !ok {
		return 0, fmt.Errorf("missing parameter %s (e.g. %q)", key, example)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number", key, s)
	}
	return n, nil
}

package transport

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// warnInterval: after a connection warning is logged, more of the same kind
// are counted, not logged, for this long. A misbehaving client (or a
// thousand) thus costs at most one line per kind every 10 s, while the first
// sign of a new kind of trouble is logged at once.
const warnInterval = 10 * time.Second

// limitedLog logs connection warnings (and the like) that clients can
// trigger at will, one kind per message: the first of a kind is logged, then
// at most one per interval, which reports as "suppressed" how many were not
// logged since the last. A count that no later warning reports is logged by
// flush. It logs nothing itself while holding its lock.
type limitedLog struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	kinds map[string]*warnKind // by message: a fixed set
}

type warnKind struct {
	level      slog.Level
	last       time.Time // when one was last logged
	suppressed int       // since then
}

func newLimitedLog(log *slog.Logger, interval time.Duration, now func() time.Time) *limitedLog {
	return &limitedLog{log: log, interval: interval, now: now, kinds: make(map[string]*warnKind)}
}

// logAt logs msg with args at level, unless one with the same msg was
// logged less than the interval ago.
func (l *limitedLog) logAt(level slog.Level, msg string, args ...any) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[msg]
	if k == nil {
		k = &warnKind{level: level}
		l.kinds[msg] = k
	} else if now.Sub(k.last) < l.interval {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Log(context.Background(), level, msg, args...)
}

func (l *limitedLog) warn(msg string, args ...any) { l.logAt(slog.LevelWarn, msg, args...) }
func (l *limitedLog) info(msg string, args ...any) { l.logAt(slog.LevelInfo, msg, args...) }

// flush logs, for each kind whose last line is an interval old (any, if
// all), how many were suppressed since (if any), so a burst's count is not
// lost when nothing follows it.
func (l *limitedLog) flush(all bool) {
	now := l.now()
	type line struct {
		level slog.Level
		msg   string
		n     int
	}
	var lines []line
	l.mu.Lock()
	for msg, k := range l.kinds {
		if k.suppressed > 0 && (all || now.Sub(k.last) >= l.interval) {
			lines = append(lines, line{k.level, msg, k.suppressed})
			k.last, k.suppressed = now, 0
		}
	}
	l.mu.Unlock()
	for _, ln := range lines {
		l.log.Log(context.Background(), ln.level, ln.msg, "suppressed", ln.n)
	}
}

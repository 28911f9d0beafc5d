package partlog

import "io"

// conf returns the log's configuration as Reconfigure last left it. The
// settings Reconfigure changes (SegmentBytes, SegmentAge,
// IndexIntervalBytes, RetentionBytes, RetentionAge, MaxBatchBytes,
// FlushPolicy) are read through it; the others from l.cfg, which never
// changes.
func (l *Log) conf() *Config { return l.live.Load() }

// Reconfigure changes the settings of an open log (a topic's configs
// altered while it is served): SegmentBytes, SegmentAge and
// IndexIntervalBytes apply from the next append (a smaller SegmentBytes
// rolls the active segment at the next append that does not fit);
// RetentionBytes and RetentionAge from the next ApplyRetention;
// MaxBatchBytes from the next append; FlushPolicy from the next append or
// fsync report (the policy is swapped while no call to the old one is in
// progress, and the old one is closed if it is an io.Closer, such as an
// external plugin's instance). The other fields of c are ignored: the clock,
// logger, hook, file budget and recovery backoff stay as opened. Zero fields
// take their defaults, as at Open; an invalid value changes nothing.
func (l *Log) Reconfigure(c Config) error {
	c.Clock, c.Logger, c.CutHook, c.Files, c.RecoveryBackoff = l.cfg.Clock, l.cfg.Logger, l.cfg.CutHook, l.cfg.Files, l.cfg.RecoveryBackoff
	c, err := c.validate()
	if err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	// Take the policy, as an append does (policy.go), so that no call to
	// the old policy is in progress when it is swapped.
	l.statMu.Lock()
	for l.polBusy {
		l.polIdle.Wait()
	}
	l.polBusy = true
	l.statMu.Unlock()
	old := l.conf().FlushPolicy
	l.live.Store(&c)
	l.releasePolicy()
	if old != c.FlushPolicy {
		if cl, ok := old.(io.Closer); ok {
			_ = cl.Close()
		}
	}
	return nil
}

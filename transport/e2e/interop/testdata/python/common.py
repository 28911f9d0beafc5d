"""Helpers shared by the interop suite's Python client scripts."""

import sys
import time

# Each wait polls with this deadline: generous for a loaded 2-core machine,
# below the Go test's bound on one operation (opTimeout, 90 s).
DEADLINE = 60.0


def log(msg):
    print(msg, flush=True)


def check(cond, msg):
    """Exits non-zero with msg unless cond holds."""
    if not cond:
        print(f"FAIL: {msg}", file=sys.stderr, flush=True)
        sys.exit(1)


def deadline_loop(what):
    """Yields until the caller breaks out, failing once DEADLINE has passed."""
    end = time.monotonic() + DEADLINE
    while True:
        check(time.monotonic() < end, f"timed out after {DEADLINE:.0f}s waiting for {what}")
        yield

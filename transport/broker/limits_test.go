package broker

import (
	"errors"
	"testing"
)

func TestLimitsConfig(t *testing.T) {
	for _, c := range []Config{
		{DataDir: "d", MaxInFlightRequests: -1},
		{DataDir: "d", MaxConnectionBytes: -1},
		{DataDir: "d", MaxFetchBytes: -1},
		{DataDir: "d", MaxQueuedRequestBytes: 1 << 20}, // below the default MaxRequestBytes
	} {
		if _, err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := (Config{DataDir: "d", FrameReadTimeout: -1}).validate(); err != nil {
		t.Errorf("a negative FrameReadTimeout (no timeout) refused: %v", err)
	}
	off := Config{DataDir: "d", WriteTimeout: -1, MaxIdle: -1, MaxQueuedRequestBytes: -1}
	if _, err := off.validate(); err != nil {
		t.Errorf("negative WriteTimeout, MaxIdle, MaxQueuedRequestBytes (off) refused: %v", err)
	}
}

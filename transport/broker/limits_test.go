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
	} {
		if _, err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("validate(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := (Config{DataDir: "d", FrameReadTimeout: -1}).validate(); err != nil {
		t.Errorf("a negative FrameReadTimeout (no timeout) refused: %v", err)
	}
}

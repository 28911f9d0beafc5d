package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weir-broker/weir/core/partlog"
)

// An append refused because the log moved past the epoch the request was
// accepted under (the broker became a follower meanwhile) is "not the
// leader", which clients retry elsewhere, not an unknown server error
// (the cluster fault lab saw UNKNOWN_SERVER_ERROR after a link came back).
func TestStaleLeaderEpochIsNotLeader(t *testing.T) {
	refused := fmt.Errorf("logs: append to t-0: %w: batch 0 at offset 7400 has epoch 0, latest is 1", partlog.ErrStaleEpoch)
	if err := staleLeader(refused); !errors.Is(err, ErrNotLeader) || !errors.Is(err, partlog.ErrStaleEpoch) {
		t.Errorf("staleLeader(%v) = %v, want ErrNotLeader wrapping the log's error", refused, err)
	}
	other := errors.New("disk on fire")
	if err := staleLeader(other); err != other {
		t.Errorf("staleLeader changed an unrelated error: %v", err)
	}
	if staleLeader(nil) != nil {
		t.Error("staleLeader(nil) != nil")
	}
}

package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// ResignedPath holds one ephemeral child per resignation (meta.Resignation:
// a broker whose log of a partition failed while it was in the ISR),
// /weir/resigned/<broker>:<topic>:<partition>:<leader epoch>. It is weir's
// stand-in for Kafka's log directory failure notifications
// (/log_dir_event_notification), which in Kafka make the controller ask the
// broker which replicas are offline; here the name says it all, so the
// controller needs only a watch on the children. Kafka's topic names
// cannot hold ':'; the broker, partition and epoch are read from the ends
// of the name. The broker removes a resignation once the partition's state
// has moved past its epoch; one left behind goes with its session, and one
// read meanwhile is stale (another epoch) and changes nothing.
const ResignedPath = "/weir/resigned"

// ResignationPath is r's node under ResignedPath.
func ResignationPath(r meta.Resignation) string {
	return fmt.Sprintf("%s/%d:%s:%d:%d", ResignedPath, r.Broker, r.Topic, r.Partition, r.LeaderEpoch)
}

func checkResignation(r meta.Resignation) error {
	if r.Broker < 0 || r.Partition < 0 || r.LeaderEpoch < 0 {
		return fmt.Errorf("%w: resignation %+v: negative broker, partition or epoch", ErrInvalid, r)
	}
	if err := checkTopicRef(r.Topic); err != nil {
		return err
	}
	return coord.ValidatePath(ResignationPath(r))
}

// ResignReplica creates r's node (and its parents when missing), owned by the
// store's session. An existing node of the same session counts as success.
func ResignReplica(ctx context.Context, s coord.Store, r meta.Resignation) error {
	if err := checkResignation(r); err != nil {
		return err
	}
	if err := createOwnEphemeral(ctx, s, ResignationPath(r)); err != nil {
		return fmt.Errorf("layout: resign %s-%d in epoch %d for broker %d: %w", r.Topic, r.Partition, r.LeaderEpoch,
			r.Broker, err)
	}
	return nil
}

// WithdrawResignation removes r's node; a node already gone is success.
func WithdrawResignation(ctx context.Context, s coord.Store, r meta.Resignation) error {
	if err := checkResignation(r); err != nil {
		return err
	}
	err := s.Delete(ctx, ResignationPath(r), coord.AnyVersion)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		return fmt.Errorf("layout: withdraw %s: %w", ResignationPath(r), err)
	}
	return nil
}

// ReadResignations returns the resignations, sorted (meta.Resignation's
// Compare), and a watch on the list. A child whose name is not a
// resignation is an error naming its path.
func ReadResignations(ctx context.Context, s coord.Store) ([]meta.Resignation, <-chan coord.Event, error) {
	if err := coord.CreateAll(ctx, s, ResignedPath, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return nil, nil, fmt.Errorf("layout: %s: %w", ResignedPath, err)
	}
	names, _, watch, err := s.ChildrenW(ctx, ResignedPath)
	if err != nil {
		return nil, nil, fmt.Errorf("layout: %s: %w", ResignedPath, err)
	}
	out := make([]meta.Resignation, 0, len(names))
	for _, n := range names {
		r, ok := parseResignation(n)
		if !ok {
			return nil, watch, malformed(ResignedPath+"/"+n, "want <broker>:<topic>:<partition>:<leader epoch>")
		}
		out = append(out, r)
	}
	slices.SortFunc(out, meta.Resignation.Compare)
	return out, watch, nil
}

// parseResignation reads a child name of ResignedPath.
func parseResignation(name string) (meta.Resignation, bool) {
	first, last := strings.IndexByte(name, ':'), strings.LastIndexByte(name, ':')
	if first < 0 || last <= first {
		return meta.Resignation{}, false
	}
	mid := strings.LastIndexByte(name[:last], ':')
	if mid <= first+1 { // an empty topic
		return meta.Resignation{}, false
	}
	broker, ok1 := parseID(name[:first])
	part, ok2 := parseID(name[mid+1 : last])
	epoch, ok3 := parseID(name[last+1:])
	if !ok1 || !ok2 || !ok3 {
		return meta.Resignation{}, false
	}
	return meta.Resignation{Broker: broker, Topic: name[first+1 : mid], Partition: part, LeaderEpoch: epoch}, true
}

package layout

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/weir-broker/weir/core/coord"
)

// Controllership is one term of a controller: broker ID won the election
// of Epoch, which it wrote to /controller_epoch, leaving that node at
// version EpochVersion. Every write of the term is fenced on that version.
type Controllership struct{ ID, Epoch, EpochVersion int32 }

// Fence is the check that fences a controller's writes: a Multi that
// includes it (first) applies only while no newer controller was elected.
func (c Controllership) Fence() coord.Op {
	return &coord.CheckOp{Path: ControllerEpochPath, Version: c.EpochVersion}
}

// fenced turns a Multi's failed Fence (the first operation) into ErrFenced,
// and leaves other errors alone.
func fenced(c Controllership, err error) error {
	var me *coord.MultiError
	if errors.As(err, &me) && me.Index == 0 {
		if chk, ok := me.Op.(*coord.CheckOp); ok && chk.Path == ControllerEpochPath {
			return fmt.Errorf("%w: controller %d of epoch %d (%s version %d): %w",
				ErrFenced, c.ID, c.Epoch, ControllerEpochPath, c.EpochVersion, err)
		}
	}
	return err
}

// Elect runs Kafka's controller election for broker id
// (KafkaZkClient.registerControllerAndIncrementControllerEpoch): it reads
// /controller_epoch (creating it with "0" if missing), then in one Multi
// creates the ephemeral /controller and sets /controller_epoch to the next
// epoch at the version read, so that two brokers never both win, and the
// winner's epoch is larger than every earlier one.
//
// When /controller exists it is read back: owned by this session and
// naming id, the election was won by an earlier attempt whose reply was
// lost (success); otherwise another broker is controller, and the error
// wraps coord.ErrNodeExists. A CAS conflict on /controller_epoch is retried
// with the epoch read again. ErrConnectionLoss is resolved by reading back;
// when that fails too, the error wraps ErrConnectionLoss and calling again
// resolves it.
func Elect(ctx context.Context, s coord.Store, id int32, nowMs int64) (Controllership, error) {
	fail := func(err error) (Controllership, error) {
		return Controllership{}, fmt.Errorf("layout: elect %d: %w", id, err)
	}
	if id < 0 {
		return fail(fmt.Errorf("%w: broker id %d < 0", ErrInvalid, id))
	}
	data := EncodeController(id, nowMs)
	for {
		epoch, version, err := readEpoch(ctx, s, true)
		if err != nil {
			return fail(err)
		}
		if epoch == math.MaxInt32 {
			return fail(malformed(ControllerEpochPath, "epoch %d cannot grow", epoch))
		}
		res, err := s.Multi(ctx,
			&coord.CreateOp{Path: ControllerPath, Data: data, Mode: coord.Ephemeral},
			&coord.SetOp{Path: ControllerEpochPath, Data: EncodeControllerEpoch(epoch + 1), Version: version})
		if err == nil {
			return Controllership{ID: id, Epoch: epoch + 1, EpochVersion: res[1].Stat.Version}, nil
		}
		var me *coord.MultiError
		switch {
		case errors.As(err, &me) && me.Index == 1 && errors.Is(err, coord.ErrBadVersion):
			continue // another election moved the epoch: read it again
		case errors.As(err, &me) && me.Index == 1 && errors.Is(err, coord.ErrNoNode):
			continue // /controller_epoch deleted by hand: create it again
		case errors.Is(err, coord.ErrNodeExists), errors.Is(err, coord.ErrConnectionLoss):
		default:
			return fail(err)
		}
		c, owner, won, rerr := readBack(ctx, s, id)
		switch {
		case rerr != nil && errors.Is(err, coord.ErrConnectionLoss):
			return fail(fmt.Errorf("%w (reading back: %w)", err, rerr))
		case rerr != nil:
			return fail(rerr)
		case won:
			return c, nil
		case c.ID >= 0:
			return fail(fmt.Errorf("%w: broker %d is controller (%s of session %#x; this is session %#x)",
				coord.ErrNodeExists, c.ID, ControllerPath, owner, s.Session().ID))
		}
		// No controller: the lost Multi was not applied (or its session
		// ended since, taking /controller with it). Run again.
	}
}

// readBack reads /controller after an election whose outcome is unknown:
// won when it is owned by this session and names id (its epoch is then
// the current /controller_epoch: nobody else can have been elected while
// it stood). c.ID is the controller's id, -1 when there is none; owner
// its session.
func readBack(ctx context.Context, s coord.Store, id int32) (c Controllership, owner int64, won bool, err error) {
	data, st, err := s.Get(ctx, ControllerPath)
	if errors.Is(err, coord.ErrNoNode) {
		return Controllership{ID: -1}, 0, false, nil
	}
	if err != nil {
		return c, 0, false, err
	}
	c.ID, err = DecodeController(ControllerPath, data)
	if err != nil {
		return c, 0, false, err
	}
	owner = st.EphemeralOwner
	if c.ID != id || owner == 0 || owner != s.Session().ID {
		return c, owner, false, nil
	}
	epoch, version, err := readEpoch(ctx, s, false)
	if err != nil {
		return c, owner, false, err
	}
	return Controllership{ID: id, Epoch: epoch, EpochVersion: version}, owner, true, nil
}

// readEpoch reads /controller_epoch and its version; a missing node is
// epoch 0, version -1, or is created with "0" (Kafka's
// InitialControllerEpoch) when create is set.
func readEpoch(ctx context.Context, s coord.Store, create bool) (epoch, version int32, err error) {
	for {
		data, st, err := s.Get(ctx, ControllerEpochPath)
		if err == nil {
			epoch, err := DecodeControllerEpoch(ControllerEpochPath, data)
			return epoch, st.Version, err
		}
		if !errors.Is(err, coord.ErrNoNode) {
			return 0, 0, err
		}
		if !create {
			return 0, -1, nil
		}
		err = s.Create(ctx, ControllerEpochPath, EncodeControllerEpoch(0), coord.Persistent)
		if err != nil && !errors.Is(err, coord.ErrNodeExists) && !errors.Is(err, coord.ErrConnectionLoss) {
			return 0, 0, err
		}
	}
}

// ReadController returns the controller's broker id (-1 when there is
// none), the current controller epoch (0 when /controller_epoch is
// missing), and a watch on /controller that fires when it is created,
// changed or deleted: every broker watches it, and runs Elect when it is
// deleted.
func ReadController(ctx context.Context, s coord.Store) (id int32, epoch int32, watch <-chan coord.Event, err error) {
	fail := func(err error) (int32, int32, <-chan coord.Event, error) {
		return 0, 0, nil, fmt.Errorf("layout: read controller: %w", err)
	}
	data, exists, _, watch, err := coord.WatchNode(ctx, s, ControllerPath)
	if err != nil {
		return fail(err)
	}
	id = -1
	if exists {
		if id, err = DecodeController(ControllerPath, data); err != nil {
			return fail(err)
		}
	}
	if epoch, _, err = readEpoch(ctx, s, false); err != nil {
		return fail(err)
	}
	return id, epoch, watch, nil
}

// Resign gives up the controllership (Kafka's triggerControllerMove):
// /controller is deleted under c's fence, so a deposed controller cannot
// delete its successor's node (ErrFenced). /controller already gone is
// success.
func Resign(ctx context.Context, s coord.Store, c Controllership) error {
	_, err := s.Multi(ctx, c.Fence(), &coord.DeleteOp{Path: ControllerPath, Version: coord.AnyVersion})
	var me *coord.MultiError
	if err == nil || errors.As(err, &me) && me.Index == 1 && errors.Is(err, coord.ErrNoNode) {
		return nil
	}
	return fmt.Errorf("layout: resign controller %d: %w", c.ID, fenced(c, err))
}

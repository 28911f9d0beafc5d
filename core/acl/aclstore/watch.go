package aclstore

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/coord"
)

// Watch reads the ACLs and calls fn with them, then again after every
// change announced under the change paths, after every change of the
// store's session (a lost connection may have hidden a change), until ctx
// ends. A failed read calls fn with the error (and a nil set: keep the last
// one) and is tried again after retry. fn runs on Watch's goroutine.
func Watch(ctx context.Context, s coord.Store, retry time.Duration, fn func(*acl.Set, Version, error)) {
	for ctx.Err() == nil {
		sess := s.Session()
		set, v, wake, err := readWatched(ctx, s)
		if ctx.Err() != nil {
			return
		}
		fn(set, v, err)
		if err != nil {
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		select {
		case <-ctx.Done():
		case <-wake[0]:
		case <-wake[1]:
		case <-sess.Changed:
		}
	}
}

// readWatched sets watches on both change paths, then reads everything: a
// change after the watches are set fires one of them.
func readWatched(ctx context.Context, s coord.Store) (*acl.Set, Version, [2]<-chan coord.Event, error) {
	var wake [2]<-chan coord.Event
	for i, p := range []string{LiteralChangesPath, ExtendedChangesPath} {
		if err := coord.EnsurePath(ctx, s, p); err != nil {
			return nil, Version{}, wake, fmt.Errorf("aclstore: %s: %w", p, err)
		}
		_, _, ch, err := s.ChildrenW(ctx, p)
		if err != nil {
			return nil, Version{}, wake, fmt.Errorf("aclstore: watch %s: %w", p, err)
		}
		wake[i] = ch
	}
	set, v, err := ReadVersioned(ctx, s)
	return set, v, wake, err
}

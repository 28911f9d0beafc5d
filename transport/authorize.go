package transport

// Authorization: with Config.Authorizer set, every request is checked
// against the ACLs before its handler runs, in one layer rather than in each
// handler. The dispatcher (conn.handle) calls authorized, which wraps the
// API's handler: the API's rule (authorize_apis.go, pure functions of the
// decoded request, the principal and the ACLs) either answers instead of
// the handler (everything the request names is denied) or filters what is
// denied out of the request and patches the handler's response with the
// denied parts and their errors (TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka answers them. Handlers
// never see a denied resource and know nothing of ACLs.
//
// The ACLs live in the coordination store (core/acl/aclstore, Kafka's
// ZooKeeper layout), read once when the server starts (a store that cannot
// be read, or garbage in it, fails NewServer naming the path) and then
// watched: each change publishes a new acl.Authorizer, which requests load
// atomically. CreateAcls and DeleteAcls publish what they wrote before they
// answer, so the broker that took the change enforces it at once; others
// follow their watch.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/acl/aclstore"
)

// aclReadTimeout bounds the first read of the ACLs in NewServer.
const aclReadTimeout = 30 * time.Second

// aclRetry is how long the watch waits after a failed read.
const aclRetry = time.Second

// aclState is the server's current authorizer and the store version it was
// read at: a read publishes only if it saw at least what the current one
// saw, so a slow read never replaces a newer one.
type aclState struct {
	cur atomic.Pointer[acl.Authorizer]
	mu  sync.Mutex
	ver aclstore.Version
}

func (st *aclState) publish(set *acl.Set, v aclstore.Version) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !v.AtLeast(st.ver) {
		return
	}
	st.ver = v
	st.cur.Store(st.cur.Load().WithACLs(set))
}

// startAuthorizer reads the ACLs and starts watching them, when
// Config.Authorizer is set.
func (s *Server) startAuthorizer() error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	store := s.node.CoordStore()
	ctx, cancel := context.WithTimeout(s.ctx, aclReadTimeout)
	set, v, err := aclstore.ReadVersioned(ctx, store)
	cancel()
	if err != nil {
		return fmt.Errorf("transport: reading the ACLs: %w", err)
	}
	st := &aclState{ver: v}
	st.cur.Store(acl.New(*s.cfg.Authorizer, set))
	s.acls = st
	s.log.Info("transport: authorizer on", "acls", set.Len(), "super_users", s.cfg.Authorizer.SuperUsers,
		"allow_everyone_if_no_acl_found", s.cfg.Authorizer.AllowEveryoneIfNoACLFound)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		aclstore.Watch(s.ctx, store, aclRetry, func(set *acl.Set, v aclstore.Version, err error) {
			if err != nil {
				s.warns.warn("transport: reading the ACLs failed, keeping the last ones", "err", err)
				return
			}
			st.publish(set, v)
		})
	}()
	return nil
}

// reloadACLs reads the ACLs and publishes them (after CreateAcls and
// DeleteAcls); a failure leaves the watch to catch up.
func (s *Server) reloadACLs(ctx context.Context) {
	if s.acls == nil {
		return
	}
	set, v, err := aclstore.ReadVersioned(ctx, s.node.CoordStore())
	if err != nil {
		s.log.Warn("transport: re-reading the ACLs after a change failed; the watch will", "err", err)
		return
	}
	s.acls.publish(set, v)
}

// authorized returns the API to run for r: a unchanged without an
// authorizer or for a super user, else a wraps of its handler by its rule.
func (c *conn) authorized(a *api, r *request) *api {
	st := c.s.acls
	if st == nil {
		return a
	}
	z := st.cur.Load()
	principal := c.principal()
	if z.IsSuperUser(principal) {
		return a
	}
	n := c.s.node
	ck := authCheck{a: z, principal: principal, host: strings.TrimPrefix(c.clientHost, "/"),
		topicName: func(id [16]byte) (string, bool) {
			t, err := n.TopicByID(id)
			return t.Name, err == nil
		},
		topicExists: func(name string) bool { _, err := n.Topic(name); return err == nil },
		latest:      st.cur.Load,
	}
	w := *a
	if a.raw != nil {
		if a.key != 1 {
			return refuseUnruled(a)
		}
		w.raw = func(ctx context.Context, s *Server, r *request) (rawResponse, error) {
			deny, p := authFetch(ck, r.body.(*kmsg.FetchRequest))
			if deny != nil {
				return deny, nil
			}
			resp, err := a.raw(ctx, s, r)
			if err == nil && resp != nil && p != nil {
				p(resp)
			}
			return resp, err
		}
		return &w
	}
	rule, ok := authRules[a.key]
	if !ok {
		return refuseUnruled(a)
	}
	if rule == nil { // everyone may
		return a
	}
	w.handle = func(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
		deny, p := rule(ck, r.body)
		if deny != nil {
			return deny, nil
		}
		resp, err := a.handle(ctx, s, r)
		if err == nil && resp != nil && p != nil {
			p(resp)
		}
		return resp, err
	}
	return &w
}

// refuseUnruled closes the connection of a request for an API that has no
// authorization rule (an API added without one): refused, not let through.
func refuseUnruled(a *api) *api {
	w := *a
	err := fmt.Errorf("%w: %s has no authorization rule (transport/authorize_apis.go)", errClose, kmsg.NameForKey(a.key))
	w.raw, w.handle = nil, func(context.Context, *Server, *request) (kmsg.Response, error) { return nil, err }
	return &w
}

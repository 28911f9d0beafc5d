package transport

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL APIs' version cases for TestEveryServedVersion: its broker has
// no authorizer, so each answers SECURITY_DISABLED at every version.
func init() {
	disabled := func(int16) int16 { return kerr.SecurityDisabled.Code }
	versionCases[29] = versionCase{
		build: func(_ testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.Version = v
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode },
		want:    disabled,
	}
	versionCases[30] = versionCase{
		build: func(_ testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrCreateACLsRequest()
			req.Version = v
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "t", "User:a", "*"
			c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode },
		want:    disabled,
	}
	versionCases[31] = versionCase{
		build: func(_ testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Version = v
			req.Filters = append(req.Filters, kmsg.NewDeleteACLsRequestFilter())
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode },
		want:    disabled,
	}
}

// TestEveryAPIUnderAuthorizer sends every served API, at every version, a
// request naming a topic, group or transactional id where it has one, to
// a broker with the authorizer on and no ACLs: each is answered (or, for
// the APIs that may rightly wait, not waited for), nothing panics
// (startBroker fails the test on a logged panic), and the connection
// stays open for the next request.
func TestEveryAPIUnderAuthorizer(t *testing.T) {
	b := startBroker(t, withAuthorizerNoACLs)
	b.createTopic(t, "t", 1, nil)
	for _, a := range apis {
		c, ok := versionCases[a.key]
		if !ok {
			continue // TestEveryServedVersion reports it
		}
		for v := a.min; v <= a.max; v++ {
			rc := b.dial(t)
			resp := rc.do(c.build(t, v))
			if resp == nil {
				t.Fatalf("%s v%d: no answer", kmsg.NameForKey(a.key), v)
			}
			rc.c.Close()
		}
	}
}

// TestACLRequestsV0AreLiteral: v0 has no pattern type; decoded as the
// broker decodes, creations and filters are LITERAL (kmsg's default), as
// Kafka reads them.
func TestACLRequestsV0AreLiteral(t *testing.T) {
	c := kmsg.NewPtrCreateACLsRequest()
	c.Version = 0
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, "t", "User:a", "*"
	c.Creations = append(c.Creations, cr)
	d := kmsg.NewPtrDeleteACLsRequest()
	d.Version = 0
	d.Filters = append(d.Filters, kmsg.NewDeleteACLsRequestFilter())
	q := kmsg.NewPtrDescribeACLsRequest()
	q.Version = 0
	for _, req := range []kmsg.Request{c, d, q} {
		got := kmsg.RequestForKey(req.Key())
		got.SetVersion(0)
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		var pt kmsg.ACLResourcePatternType
		switch r := got.(type) {
		case *kmsg.CreateACLsRequest:
			pt = r.Creations[0].ResourcePatternType
		case *kmsg.DeleteACLsRequest:
			pt = r.Filters[0].ResourcePatternType
		case *kmsg.DescribeACLsRequest:
			pt = r.ResourcePatternType
		}
		if pt != kmsg.ACLResourcePatternTypeLiteral {
			t.Errorf("%s v0: pattern type %v, want LITERAL", kmsg.NameForKey(req.Key()), pt)
		}
	}
}

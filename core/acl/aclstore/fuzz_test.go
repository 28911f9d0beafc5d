package aclstore_test

import (
	"slices"
	"testing"

	"github.com/weir-broker/weir/core/acl/aclstore"
)

// FuzzDecode: a pattern node's data never crashes Decode; what it accepts
// encodes back to data that decodes to the same entries.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "{}", "null", `{"version":1,"acls":[]}`,
		`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`,
		`{"version":1,"acls":[{"principal":"User:a","permissionType":"Deny","operation":"describe-configs","host":"10.0.0.1"}]}garbage`,
		`{"version":2,"acls":[{"principal":"User:a"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := aclstore.Decode("/kafka-acl/Topic/t", data)
		if err != nil {
			return
		}
		again, err := aclstore.Decode("/kafka-acl/Topic/t", aclstore.Encode(es))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", aclstore.Encode(es), err)
		}
		if !slices.Equal(es, again) {
			t.Fatalf("round trip: %v became %v", es, again)
		}
	})
}

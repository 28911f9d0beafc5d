package acl

import (
	"fmt"
	"testing"
)

// BenchmarkAuthorize: one check against 10,000 literal topic ACLs, 100
// prefixes and a wildcard, for a topic name of 20 characters: what every
// partition of every request costs under an authorizer.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := 0; i < 10000; i++ {
		bs = append(bs, Binding{Pattern{ResourceTopic, PatternLiteral, fmt.Sprintf("topic-%06d", i)},
			Entry{fmt.Sprintf("User:u%d", i%50), "*", OpRead, Allow}})
	}
	for i := 0; i < 100; i++ {
		bs = append(bs, Binding{Pattern{ResourceTopic, PatternPrefixed, fmt.Sprintf("team%02d-", i)},
			Entry{"User:u7", "*", OpWrite, Allow}})
	}
	bs = append(bs, Binding{Pattern{ResourceTopic, PatternLiteral, "*"}, Entry{"User:*", "10.9.9.9", OpAll, Deny}})
	a := New(Config{}, NewSet(bs...))
	r := Resource{Type: ResourceTopic, Name: "team07-orders-000001"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !a.Authorize("User:u7", "10.0.0.1", OpWrite, r) {
			b.Fatal("denied")
		}
	}
}

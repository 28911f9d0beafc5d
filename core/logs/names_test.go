package logs

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"A.b_c-D9", true},
		{"...", true},
		{"__consumer_offsets", true},
		{strings.Repeat("x", 249), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 250), false},
		{"a/b", false},
		{"a b", false},
		{"a\x00b", false},
		{"tópico", false},
		{"a:b", false},
		{"a\\b", false},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidateName(%q) = %v, not ErrInvalidTopic", tc.name, err)
		}
	}
}

func TestDirName(t *testing.T) {
	for _, tc := range []struct {
		topic string
		p     int32
	}{{"a", 0}, {"a-1", 0}, {"a", 10}, {"a-b-c", 2147483647}, {"-", 3}} {
		d := DirName(tc.topic, tc.p)
		topic, p, ok := ParseDirName(d)
		if !ok || topic != tc.topic || p != tc.p {
			t.Errorf("ParseDirName(%q) = %q, %d, %v; want %q, %d", d, topic, p, ok, tc.topic, tc.p)
		}
	}
	for _, bad := range []string{"a", "a-", "-0", "a-01", "a-+1", "a--1x", "a-2147483648", "a/b-0", "weir-meta.json", "..-0"} {
		if _, _, ok := ParseDirName(bad); ok {
			t.Errorf("ParseDirName(%q) accepted", bad)
		}
	}
}

package logs

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxNameLength is Kafka's limit on topic names: 249 characters, so that
// "<topic>-<partition>" stays a legal file name (255 bytes).
const MaxNameLength = 249

// ValidateName checks a topic name against Kafka's rules: 1..249 characters
// from [a-zA-Z0-9._-], and neither "." nor "..". The error wraps
// ErrInvalidTopic and says what is wrong.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: name of %d characters, limit %d", ErrInvalidTopic, len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !legalNameByte(name[i]) {
			return fmt.Errorf("%w: %q contains %q; allowed are ASCII letters, digits, '.', '_' and '-'",
				ErrInvalidTopic, name, name[i])
		}
	}
	return nil
}

func legalNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// DirName is the directory of a partition below the data directory, as Kafka
// names it: "<topic>-<partition>". The mapping is one-to-one because the
// partition part has no '-'.
func DirName(topic string, p int32) string {
	return topic + "-" + strconv.FormatInt(int64(p), 10)
}

// ParseDirName splits "<topic>-<partition>" and reports whether name has that
// shape with a valid topic name and a canonical non-negative int32.
func ParseDirName(name string) (string, int32, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return "", 0, false
	}
	topic, num := name[:i], name[i+1:]
	p, err := strconv.ParseInt(num, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != num || ValidateName(topic) != nil {
		return "", 0, false
	}
	return topic, int32(p), true
}

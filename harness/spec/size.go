package spec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ByteSize is a count of bytes, written in a spec as a number or with a
// unit: 100, 100B, 4KiB, 1MiB, 1GiB (powers of 1024) or 10KB, 1MB, 1GB
// (powers of 1000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first, so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"B", 1},
}

// ParseByteSize reads a ByteSize from its text form.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size (want a number, optionally with B, KiB, MiB, GiB, KB, MB or GB)", s)
	}
	if n != 0 && (n > math.MaxInt64/mult || n < math.MinInt64/mult) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML reads a number or a number with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a byte size (such as 1024 or 1KiB)", n.Line)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// MarshalYAML writes the shortest exact form.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// String formats b in its shortest exact form: a plain number, or a number
// with a binary or decimal unit (1KiB, 10KB, 1000012); a unit, and binary,
// win ties.
func (b ByteSize) String() string {
	best, plain := strconv.FormatInt(int64(b), 10), true
	if b == 0 {
		return best
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if int64(b)%u.m == 0 {
			s := strconv.FormatInt(int64(b)/u.m, 10) + u.s
			if len(s) < len(best) || (plain && len(s) == len(best)) {
				best, plain = s, false
			}
		}
	}
	return best
}

// Message size distributions.
const (
	Fixed       = "fixed"
	Uniform     = "uniform"
	Normal      = "normal"
	Exponential = "exponential"
)

// MessageSize is the size of record values: a fixed number of bytes, or a
// distribution clipped to [Min, Max]. In a spec it is a byte size (fixed) or
// a map: {distribution: uniform, min, max}, {distribution: normal, mean,
// stddev, min, max}, {distribution: exponential, mean, min, max}.
type MessageSize struct {
	Distribution string   // Fixed, Uniform, Normal or Exponential
	Size         ByteSize // Fixed
	Min, Max     ByteSize // the others: every size lies in [Min, Max]
	Mean         ByteSize // Normal, Exponential
	Stddev       ByteSize // Normal
}

// messageSizeFields are the keys a distribution map may have.
var messageSizeFields = []string{"distribution", "min", "max", "mean", "stddev"}

// UnmarshalYAML reads a byte size or a distribution map, rejecting unknown
// keys like the rest of the spec.
func (m *MessageSize) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		var b ByteSize
		if err := b.UnmarshalYAML(n); err != nil {
			return err
		}
		*m = MessageSize{Distribution: Fixed, Size: b}
		return nil
	case yaml.MappingNode:
	default:
		return fmt.Errorf("line %d: message_size: want a byte size or a map {distribution: ..., min: ..., max: ...}", n.Line)
	}
	out := MessageSize{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(messageSizeFields, k.Value) {
			return fmt.Errorf("line %d: unknown field %q in message_size (known: %s)", k.Line, k.Value, strings.Join(messageSizeFields, ", "))
		}
		if k.Value == "distribution" {
			out.Distribution = v.Value
			continue
		}
		var b ByteSize
		if err := b.UnmarshalYAML(v); err != nil {
			return fmt.Errorf("message_size.%s: %w", k.Value, err)
		}
		switch k.Value {
		case "min":
			out.Min = b
		case "max":
			out.Max = b
		case "mean":
			out.Mean = b
		case "stddev":
			out.Stddev = b
		}
	}
	if out.Distribution == "" {
		return fmt.Errorf("line %d: message_size: a map needs distribution: uniform, normal or exponential", n.Line)
	}
	*m = out
	return nil
}

// MarshalYAML writes the form UnmarshalYAML reads.
func (m MessageSize) MarshalYAML() (any, error) {
	if m.Distribution == Fixed {
		return m.Size.String(), nil
	}
	out := map[string]string{"distribution": m.Distribution, "min": m.Min.String(), "max": m.Max.String()}
	if m.Mean != 0 {
		out["mean"] = m.Mean.String()
	}
	if m.Stddev != 0 {
		out["stddev"] = m.Stddev.String()
	}
	return out, nil
}

// String is the compact form used in point IDs: "1KiB", "uniform-100-1KiB",
// "normal-1KiB-256-64-4KiB", "exponential-1KiB-64-16KiB".
func (m MessageSize) String() string {
	switch m.Distribution {
	case Fixed:
		return m.Size.String()
	case Uniform:
		return fmt.Sprintf("uniform-%v-%v", m.Min, m.Max)
	case Normal:
		return fmt.Sprintf("normal-%v-%v-%v-%v", m.Mean, m.Stddev, m.Min, m.Max)
	case Exponential:
		return fmt.Sprintf("exponential-%v-%v-%v", m.Mean, m.Min, m.Max)
	}
	return m.Distribution
}

// Bounds returns the smallest and largest size m can produce.
func (m MessageSize) Bounds() (lo, hi int64) {
	if m.Distribution == Fixed {
		return int64(m.Size), int64(m.Size)
	}
	return int64(m.Min), int64(m.Max)
}

// MinMessageSize is the smallest record value: the 8-byte send timestamp
// that end-to-end latency is measured with.
const MinMessageSize = 8

// validate returns what is wrong with m, or "".
func (m MessageSize) validate() string {
	switch m.Distribution {
	case Fixed:
		if m.Size < MinMessageSize {
			return fmt.Sprintf("must be >= %d bytes (the send timestamp), got %d", MinMessageSize, m.Size)
		}
		return ""
	case Uniform, Normal, Exponential:
	default:
		return fmt.Sprintf("unknown distribution %q (known: uniform, normal, exponential)", m.Distribution)
	}
	switch {
	case m.Min < MinMessageSize:
		return fmt.Sprintf("min must be >= %d bytes (the send timestamp), got %d", MinMessageSize, m.Min)
	case m.Max < m.Min:
		return fmt.Sprintf("max %d is below min %d", m.Max, m.Min)
	}
	switch m.Distribution {
	case Uniform:
		if m.Mean != 0 || m.Stddev != 0 {
			return "uniform takes min and max only"
		}
	case Normal:
		if m.Mean < m.Min || m.Mean > m.Max {
			return fmt.Sprintf("mean %d is outside [min, max] = [%d, %d]", m.Mean, m.Min, m.Max)
		}
		if m.Stddev <= 0 {
			return "normal needs stddev > 0"
		}
	case Exponential:
		if m.Mean <= 0 || m.Mean < m.Min || m.Mean > m.Max {
			return fmt.Sprintf("exponential needs mean in [min, max] = [%d, %d], got %d", m.Min, m.Max, m.Mean)
		}
		if m.Stddev != 0 {
			return "exponential takes mean, min and max"
		}
	}
	return ""
}

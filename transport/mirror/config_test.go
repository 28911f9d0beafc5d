package mirror

import (
	"errors"
	"testing"
)

func TestConfigTopicsAndAliases(t *testing.T) {
	c := Config{Source: []string{"a:1"}, Target: []string{"b:1"}, Topics: "orders|dc1\\..*|x.*", SourceAlias: "dc2", TargetAlias: "dc1"}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{
		"orders":                   true,
		"orders2":                  false, // the expression matches whole names
		"dc1.orders":               false, // came from the target: two-way mirroring must not loop
		"__consumer_offsets":       false, // internal, excluded by default
		"x1":                       true,
		"weir-mirror.offset-syncs": false,
	} {
		if got := c.mirrored(topic); got != want {
			t.Errorf("mirrored(%q) = %v, want %v", topic, got, want)
		}
	}
	if got := c.TargetTopic("orders"); got != "dc2.orders" {
		t.Errorf("TargetTopic(orders) = %q, want dc2.orders", got)
	}
	if c.CommitInterval != DefaultCommitInterval || c.OffsetSyncInterval != DefaultOffsetSyncInterval || c.ReplicationFactor != -1 {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestConfigRejects(t *testing.T) {
	base := func() Config { return Config{Source: []string{"a:1"}, Target: []string{"b:1"}, Topics: "t"} }
	for name, mod := range map[string]func(*Config){
		"no source":         func(c *Config) { c.Source = nil },
		"no target":         func(c *Config) { c.Target = nil },
		"no topics":         func(c *Config) { c.Topics = "" },
		"bad expression":    func(c *Config) { c.Topics = "(" },
		"dotted alias":      func(c *Config) { c.SourceAlias = "a.b" },
		"same aliases":      func(c *Config) { c.SourceAlias, c.TargetAlias = "a", "a" },
		"negative interval": func(c *Config) { c.OffsetSyncInterval = -1 },
		"backoff inverted":  func(c *Config) { c.BackoffMin, c.BackoffMax = 2e9, 1e9 },
		"unknown codec":     func(c *Config) { c.Compression = "brotli" },
	} {
		c := base()
		mod(&c)
		if err := c.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: validate() = %v, want ErrConfig", name, err)
		}
	}
}

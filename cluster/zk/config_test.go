package zk_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/weir-broker/weir/cluster/zk"
)

func TestParseConnectString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		chroot  string
	}{
		{"127.0.0.1:2181", []string{"127.0.0.1:2181"}, ""},
		{"a:1,b:2,c:3/kafka", []string{"a:1", "b:2", "c:3"}, "/kafka"},
		{"zk1,zk2:2182/weir/prod", []string{"zk1:2181", "zk2:2182"}, "/weir/prod"},
		{"[::1]:2181,[::1]/x", []string{"[::1]:2181", "[::1]:2181"}, "/x"},
		{" h:5/ ", []string{"h:5"}, ""},
	} {
		cfg, err := zk.ParseConnectString(tc.in)
		if err != nil || !slices.Equal(cfg.Servers, tc.servers) || cfg.Chroot != tc.chroot {
			t.Errorf("ParseConnectString(%q) = %q, %q, %v; want %q, %q", tc.in, cfg.Servers, cfg.Chroot, err, tc.servers, tc.chroot)
		}
	}
	for _, bad := range []string{"", "/chroot", "a:1,,b:2", "a:1/x/", "a:1/x//y", "a:http", "a:0", "a:70000", ":2181", "a:1/x/../y", "::1"} {
		if cfg, err := zk.ParseConnectString(bad); !errors.Is(err, zk.ErrConfig) {
			t.Errorf("ParseConnectString(%q) = %+v, %v; want ErrConfig", bad, cfg, err)
		}
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]zk.Config{
		"no servers":       {},
		"relative chroot":  {Servers: []string{"h:1"}, Chroot: "weir"},
		"negative timeout": {Servers: []string{"h:1"}, SessionTimeout: -1},
		"negative buffer":  {Servers: []string{"h:1"}, MaxBufferSize: -1},
	} {
		if _, err := zk.Open(context.Background(), cfg); !errors.Is(err, zk.ErrConfig) {
			t.Errorf("%s: Open = %v, want ErrConfig", name, err)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginsListsDirectory: executables named weir-<kind>-<name> in the
// plugin directory are listed under their kind; other files are not; an
// unknown kind is an error naming the known ones.
func TestPluginsListsDirectory(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{
		"weir-codec-s2":              0o755,
		"weir-partitioner-keyrange":  0o755,
		"weir-codec-notexecutable":   0o644,
		"unrelated-binary":           0o755,
		"weir-flushpolicy-ratelimit": 0o755,
		"weir-codec-":                0o755,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"plugins", "codec", "--plugin-dir", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"codec  s2 ", "codec  zstd ", "codec  gzip "} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"keyrange", "notexecutable", "unrelated", "ratelimit", "murmur2"} {
		if strings.Contains(got, bad) {
			t.Errorf("codec listing shows %q:\n%s", bad, got)
		}
	}
	out.Reset()
	if err := run([]string{"plugins", "--plugin-dir", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partitioner  keyrange", "flushpolicy  ratelimit", "partitioner  murmur2", "flushpolicy  adaptive"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("full listing lacks %q:\n%s", want, out.String())
		}
	}
	err := run([]string{"plugins", "codecs"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown plugin kind "codecs" (known: codec, partitioner, flushpolicy)`) {
		t.Fatalf("unknown kind: %v", err)
	}
	if err := run([]string{"plugins", "--plugin-dir", filepath.Join(dir, "missing")}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("a missing plugin directory was accepted")
	}
}

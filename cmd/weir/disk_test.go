package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/device/model"
)

func TestDiskGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"disk-help", []string{"disk", "--help"}},
		{"disk-mount-help", []string{"disk", "mount", "--help"}},
		{"disk-profiles", []string{"disk", "profiles"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc.name, tc.args) })
	}
}

func TestDiskMountErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
		msg  string
	}{
		{[]string{"disk", "mount", "--profile", "hdd-9000", "--backing", t.TempDir(), t.TempDir()}, model.ErrProfile, "unknown profile"},
		{[]string{"disk", "mount", t.TempDir()}, nil, "--backing is required"},
		{[]string{"disk", "mount", "--time", "fast", "--backing", t.TempDir(), t.TempDir()}, nil, "real or simulated"},
		{[]string{"disk", "status", t.TempDir()}, nil, "is not an emulated disk"},
		{[]string{"disk", "cut", t.TempDir()}, nil, "is not an emulated disk"},
	} {
		err := run(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("run(%q) = %v, want an error saying %q", tc.args, err, tc.msg)
		}
	}
}

// waitMounted polls for the control file of a mount starting in another goroutine.
func waitMounted(t *testing.T, mnt string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(mnt, diskfs.ControlFile)); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("disk mount ended before mounting: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("disk mount did not mount within 20 s")
		}
		time.Sleep(20 * time.Millisecond) // polling for another goroutine's mount, with a deadline
	}
}

// TestDiskMountCut: `weir disk mount` serves a disk, `disk status` reads it, `disk cut` loses the unsynced file,
// `disk unmount` ends the mount command, which prints what the device did.
func TestDiskMountCut(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	var stdout bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"disk", "mount", "--profile", "raid5-6xhdd-7200", "--time", "simulated", "--backing", backing, mnt}, &stdout, &bytes.Buffer{})
	}()
	t.Cleanup(func() { diskfs.Unmount(mnt) }) // in case the test fails before its unmount
	waitMounted(t, mnt, done)
	if err := os.WriteFile(filepath.Join(mnt, "unsynced"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var status bytes.Buffer
	if err := run([]string{"disk", "status", mnt}, &status, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "profile: raid5-6xhdd-7200\n") || !strings.Contains(status.String(), "unsynced_dirs: 1\n") {
		t.Errorf("disk status printed:\n%s", status.String())
	}
	if err := run([]string{"disk", "cut", mnt}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(backing, "unsynced")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after disk cut the unsynced file: %v, want it gone", err)
	}
	if err := run([]string{"disk", "cut", mnt}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("a second cut succeeded")
	}
	if err := run([]string{"disk", "unmount", mnt}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("disk mount: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("disk mount did not end after disk unmount")
	}
	if !strings.Contains(stdout.String(), "mounted raid5-6xhdd-7200") || !strings.Contains(stdout.String(), "unmounted: device time") {
		t.Errorf("disk mount printed:\n%s", stdout.String())
	}
}

// TestDiskMountStopsOnContext: cancelling the command (as SIGINT does) unmounts.
func TestDiskMountStopsOnContext(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runContext(ctx, []string{"disk", "mount", "--profile", "ssd", "--backing", filepath.Join(dir, "b"), mnt}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	t.Cleanup(func() { diskfs.Unmount(mnt) })
	waitMounted(t, mnt, done)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("disk mount: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("disk mount did not end when its context was cancelled")
	}
	if _, err := os.Stat(filepath.Join(mnt, diskfs.ControlFile)); err == nil {
		t.Error("still mounted after the command ended")
	}
}

// TestDiskMountSIGUSR1: SIGUSR1 to the mount process cuts the power.
func TestDiskMountSIGUSR1(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runContext(ctx, []string{"disk", "mount", "--profile", "hdd-7200", "--time", "simulated", "--backing", filepath.Join(dir, "b"), mnt}, &stdout, &bytes.Buffer{})
	}()
	t.Cleanup(func() { diskfs.Unmount(mnt) })
	waitMounted(t, mnt, done)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(mnt, diskfs.ControlFile))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "cut: true\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cut 20 s after SIGUSR1:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond) // polling the other goroutine's signal handling, with a deadline
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "power cut: ") {
		t.Errorf("disk mount printed:\n%s", stdout.String())
	}
}

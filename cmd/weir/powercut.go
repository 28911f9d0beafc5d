package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/harness/brokerproc"
)

// powerCut is `weir broker --power-cut-fs`, a lab flag (hidden from --help): the broker runs on a vfs.PowerFS
// whose MemFS starts as a copy of its data directory (everything in it durable) and whose mirror is the data
// directory itself, so the directory always holds what the page cache would: a SIGKILL, a SIGTERM or a look from
// outside find what they would with any broker. SIGUSR1 cuts the power: the crash clone (what was fsynced, with
// torn unsynced tails) is written over the data directory, fsynced, and the process exits at once with
// brokerproc.PowerCutStatus, without a controlled shutdown or closing its ZooKeeper session (which expires as
// after a crash). The broker's log goes quiet at the cut (its failing file operations are the cut's doing); one
// line says what survived.
type powerCut struct {
	dir     string
	fs      *vfs.PowerFS
	logger  *slog.Logger // not silenced at the cut
	cutting chan struct{}
	off     atomic.Bool // the broker's log is silenced
}

// startPowerCut loads the data directory into memory and returns the power-cut file system, and the logger the
// broker is to log through. The returned powerCut cuts on SIGUSR1 until the process ends.
func startPowerCut(dataDir string, logger *slog.Logger) (*powerCut, *slog.Logger, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--power-cut-fs: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("--power-cut-fs: %w", err)
	}
	mem := vfs.NewMem()
	size, err := vfs.CopyTree(mem, vfs.Default, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--power-cut-fs: load the data directory: %w", err)
	}
	pc := &powerCut{dir: dir, fs: vfs.NewPower(mem, vfs.PowerConfig{Mirror: vfs.Default}), logger: logger,
		cutting: make(chan struct{})}
	logger.Info("power-cut file system: data directory loaded; SIGUSR1 cuts the power", "dir", dir, "files", size.Files, "bytes", size.Bytes)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		<-sig
		pc.cut()
	}()
	return pc, slog.New(brokerproc.Quiet(logger.Handler(), &pc.off)), nil
}

// cut cuts the power and ends the process.
func (pc *powerCut) cut() {
	close(pc.cutting)
	pc.off.Store(true)
	seed := uint64(time.Now().UnixNano())
	clone, _ := pc.fs.Cut(rand.New(rand.NewPCG(seed, seed)))
	size, err := vfs.CopyTree(vfs.Default, clone, pc.dir)
	if err != nil {
		pc.logger.Error("power cut: the data directory could not be given what survived", "dir", pc.dir, "err", err)
		os.Exit(1)
	}
	pc.logger.Warn("power cut: the data directory holds what was fsynced", "dir", pc.dir, "files", size.Files,
		"bytes", size.Bytes, "torn-seed", seed)
	os.Exit(brokerproc.PowerCutStatus)
}

// hold blocks for good once the power is being cut (cut ends the process): the broker, its file operations
// failing, must neither return an error that exits the process first nor shut down gracefully. A nil powerCut
// returns at once.
func (pc *powerCut) hold() {
	if pc == nil {
		return
	}
	select {
	case <-pc.cutting:
		select {}
	default:
	}
}

// fsys is the broker's file system: nil (the default, the OS) without a powerCut.
func (pc *powerCut) fsys() vfs.FS {
	if pc == nil {
		return nil
	}
	return pc.fs
}

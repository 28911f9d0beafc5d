package main

// `weir disk mount|unmount|status|cut|profiles`: emulated disks (harness/device). mount serves a diskfs file
// system in the foreground until SIGINT/SIGTERM or an unmount; SIGUSR1 cuts its power (loses what no fsync
// covered). status and cut talk to a mount through its control file, so they work from any process.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/device/model"
)

func newDiskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "disk",
		Short: "Emulated disks: a FUSE file system that takes the time of a modelled HDD, RAID array or SSD",
		Long: `An emulated disk is a FUSE file system that stores its files in a backing
directory and makes every operation take the time a modelled device would: a
7200 rpm disk (seek curve, rotation, zoned transfer, write cache), JBOD,
RAID-0 or RAID-5 arrays of them, or an SSD. It can also cut the power: every
write no fsync covered is lost, file data and directory entries. Mounting
needs root (mount(2) without fusermount) and /dev/fuse.`,
	}
	cmd.AddCommand(newDiskMountCmd(), newDiskUnmountCmd(), newDiskStatusCmd(), newDiskCutCmd(), newDiskProfilesCmd())
	return cmd
}

func newDiskMountCmd() *cobra.Command {
	var profile, backing, clock string
	var cacheBytes, dirtyBytes, dirtyBackground int64
	var debug bool
	cmd := &cobra.Command{
		Use:   "mount --profile PROFILE --backing DIR MOUNTPOINT",
		Short: "Mount an emulated disk and serve it in the foreground until SIGINT, SIGTERM or unmount",
		Long: `Mount an emulated disk at MOUNTPOINT, storing its files in --backing, and
serve it until SIGINT or SIGTERM (then unmount) or until it is unmounted
(weir disk unmount, umount). SIGUSR1, 'weir disk cut MOUNTPOINT' or writing
"lose-unsynced" to MOUNTPOINT/.weirdisk/control cuts the power: every write no
fsync covered is taken back in the backing directory, and later changes fail
with EIO until the disk is unmounted and mounted again.

PROFILE is a name of 'weir disk profiles', an array LAYOUT-NxDISK (raid5-4xhdd-7200,
raid0-2xssd, jbod-3xhdd-7200), or a YAML file of numbers (.yaml).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if backing == "" {
				return fmt.Errorf("disk mount: --backing is required")
			}
			p, err := model.ParseProfile(profile)
			if err != nil {
				return fmt.Errorf("disk mount: %w", err)
			}
			var real bool
			switch clock {
			case "real":
				real = true
			case "simulated":
			default:
				return fmt.Errorf("disk mount: --time %q: real or simulated", clock)
			}
			if err := diskfs.CanMount(); err != nil {
				return fmt.Errorf("disk mount: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1) // before mounting: a cut requested once mounted must not kill us
			defer signal.Stop(usr1)
			m, err := diskfs.New(args[0], diskfs.Options{Profile: p, Backing: backing, RealTime: real,
				CacheBytes: cacheBytes, DirtyBytes: dirtyBytes, DirtyBackgroundBytes: dirtyBackground, Debug: debug,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))})
			if err != nil {
				return fmt.Errorf("disk mount: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "mounted %s (%s) at %s, backing %s, %s time\n", p.Name, p.Summary(), args[0], backing, clock)
			fmt.Fprintf(out, "cut the power: kill -USR1 %d, weir disk cut %s, or echo lose-unsynced > %s\n",
				os.Getpid(), args[0], filepath.Join(args[0], diskfs.ControlFile))
			return serveDisk(ctx, m, usr1, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "hdd-7200", "device profile: a name, LAYOUT-NxDISK, or a .yaml file")
	f.StringVar(&backing, "backing", "", "directory that stores the files (created if missing; required)")
	f.StringVar(&clock, "time", "real", "real (operations sleep for the modelled time) or simulated (accounted only)")
	f.Int64Var(&cacheBytes, "cache-bytes", 0, "modelled page cache for clean pages (default 1 GiB)")
	f.Int64Var(&dirtyBackground, "dirty-background-bytes", 0, "dirty bytes that start background writeback (default 64 MiB)")
	f.Int64Var(&dirtyBytes, "dirty-bytes", 0, "dirty bytes over which writers wait for writeback (default 256 MiB)")
	f.BoolVar(&debug, "debug", false, "log every FUSE request to stderr")
	return cmd
}

// serveDisk waits for the mount to end (unmounted from outside, or ctx done: then it unmounts), cutting its power
// on SIGUSR1, and prints what the device did.
func serveDisk(ctx context.Context, m *diskfs.Mount, usr1 <-chan os.Signal, out io.Writer) error {
	ended := make(chan struct{})
	go func() { m.Wait(); close(ended) }()
	var err error
loop:
	for {
		select {
		case <-usr1:
			rep, cerr := m.LoseUnsynced()
			if cerr != nil && !errors.Is(cerr, diskfs.ErrCut) {
				fmt.Fprintf(out, "power cut: %v\n", cerr)
				continue
			}
			fmt.Fprintf(out, "power cut: %d files taken back to their last fsync, %d entries removed, %d restored, %d dirty pages lost; unmount and mount again to power on\n",
				rep.Files, rep.Removed, rep.Restored, rep.DirtyPages)
		case <-ended:
			break loop
		case <-ctx.Done():
			err = m.Unmount()
			<-ended
			break loop
		}
	}
	st := m.Status()
	fmt.Fprintf(out, "unmounted: device time %v, %d requests (%d member commands), %d bytes read, %d written, %d fsyncs\n",
		st.DeviceTime.Round(time.Millisecond), st.Device.Requests, st.Device.Commands, st.Device.BytesRead,
		st.Device.BytesWritten, st.Counts.Fsyncs)
	return err
}

func newDiskUnmountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unmount MOUNTPOINT",
		Short: "Unmount an emulated disk (its 'weir disk mount' then exits)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := diskfs.Unmount(args[0]); err != nil {
				if errors.Is(err, syscall.EPERM) {
					return fmt.Errorf("disk unmount: %w (needs root)", err)
				}
				return fmt.Errorf("disk unmount: %w", err)
			}
			return nil
		},
	}
}

func newDiskStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status MOUNTPOINT",
		Short: "Print an emulated disk's counters and unsynced state (its control file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(filepath.Join(args[0], diskfs.ControlFile))
			if err != nil {
				return fmt.Errorf("disk status: %s is not an emulated disk: %w", args[0], err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

func newDiskCutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cut MOUNTPOINT",
		Short: "Cut an emulated disk's power: lose every write no fsync covered",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctl := filepath.Join(args[0], diskfs.ControlFile)
			if _, err := os.Stat(ctl); err != nil {
				return fmt.Errorf("disk cut: %s is not an emulated disk: %w", args[0], err)
			}
			if err := os.WriteFile(ctl, []byte("lose-unsynced\n"), 0); err != nil {
				return fmt.Errorf("disk cut: %w (was the power already cut?)", err)
			}
			return nil
		},
	}
}

func newDiskProfilesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "profiles",
		Short: "List the named device profiles and their numbers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tCAPACITY\tDEVICE")
			for _, p := range model.Profiles() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, strings.TrimSpace(fmt.Sprintf("%.1f TB", float64(p.DataBytes())/1e12)), p.Summary())
			}
			fmt.Fprintln(w, "\nAny LAYOUT-NxDISK also works (layouts jbod, raid0, raid5; disks hdd-7200, hdd-7200-nocache, ssd),")
			fmt.Fprintln(w, "and a YAML file of numbers; sources of the defaults: go doc ./harness/device/model.")
			return w.Flush()
		},
	}
}

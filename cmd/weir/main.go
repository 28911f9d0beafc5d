// Command weir is the one command-line entry point of weir, a Kafka-style
// persistent log broker and a harness for experiments on it.
//
// main only calls run, so tests drive the whole CLI through run with their
// own arguments and writers and compare the output with golden files in
// testdata/.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "weir: %v\n", err)
		os.Exit(1)
	}
}

// run executes the weir command line args (without the program name),
// writing output to stdout and diagnostics to stderr. It returns the error
// that should end the process with a non-zero status; it prints nothing for
// it.
func run(args []string, stdout, stderr io.Writer) error {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that long-running commands (weir broker)
// stop on, besides SIGINT and SIGTERM, so tests can stop them in-process.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "weir",
		Short: "A Kafka-style persistent log broker and experiment harness",
		Long: `weir is a Kafka-style persistent log broker, with pluggable codecs,
partitioners and flush policies, and a harness to measure how they trade
throughput, latency and durability: run a broker, produce and consume with
any codec and partitioner, run experiments and compare their results.`,
		SilenceUsage:  true, // usage on every runtime error hides the error
		SilenceErrors: true, // main prints the error once
	}
	root.AddCommand(newVersionCmd(), newBrokerCmd(), newProduceCmd(), newConsumeCmd(),
		newRunCmd(), newCompareCmd(), newPluginsCmd(), newFlushPoliciesCmd(), newClusterCmd(),
		newDiskCmd(), newPlanCmd(), newTxnCmd(), newACLCmd(), newMirrorCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print weir's version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine(bi, ok))
			return err
		},
	}
}

// versionLine describes a build: "weir VERSION", then the VCS commit and
// whether the tree was modified when the build recorded them, then the Go
// version. VERSION is the module version, or "devel" for a build from a
// source tree.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "weir devel"
	}
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	var b strings.Builder
	b.WriteString("weir " + version)
	settings := make(map[string]string)
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		b.WriteString(" commit " + rev)
		if settings["vcs.modified"] == "true" {
			b.WriteString(" (modified)")
		}
	}
	if bi.GoVersion != "" {
		b.WriteString(" " + bi.GoVersion)
	}
	return b.String()
}

func newFlushPoliciesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "flush-policies",
		Short: "List the flush policies and what a power cut loses under each",
		Long: `List the registered flush policies. A flush policy decides when a partition
log fsyncs; a spec names one and its parameters: NAME or NAME:key=value,...
A process crash loses nothing under any policy (the page cache survives it);
the loss bounds listed are for a power cut, per partition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeFlushPolicies(cmd.OutOrStdout(), flushpolicy.Infos())
		},
	}
}

func writeFlushPolicies(w io.Writer, infos []flushpolicy.Info) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSPEC\tDESCRIPTION")
	for _, info := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", info.Name, orDash(info.Usage), orDash(info.Summary))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

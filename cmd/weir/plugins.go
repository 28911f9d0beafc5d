package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/spec"
)

// pluginKinds are the kinds in listing order, with their built-ins.
var pluginKinds = []struct {
	kind  string
	infos func() []spec.Info
}{
	{"codec", codec.Infos},
	{"partitioner", partitioner.Infos},
	{"flushpolicy", flushpolicy.Infos},
}

func newPluginsCmd() *cobra.Command {
	dir := os.Getenv("WEIR_PLUGIN_DIR")
	cmd := &cobra.Command{
		Use:   "plugins [codec|partitioner|flushpolicy]",
		Short: "List the codecs, partitioners and flush policies: built-ins and external plugins",
		Long: `List what a spec can name, for each plugin kind (or the one given): the
built-ins compiled into weir, then the external plugins found in --plugin-dir
(executables named weir-<kind>-<name>, used as <name>). A spec is NAME or
NAME:key=value,...; a spec containing '/' is the path of a plugin binary.
Specs are what --codec and --partitioner (weir produce), the topic configs
compression.type and weir.flush.policy (weir broker), and harness specs take.`,
		Example: `  weir plugins
  weir plugins codec --plugin-dir bin/plugins`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"codec", "partitioner", "flushpolicy"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return writePlugins(cmd.OutOrStdout(), args, dir)
		},
	}
	cmd.Flags().StringVar(&dir, "plugin-dir", dir, "`dir`ectory searched for weir-<kind>-<name> plugins (default $WEIR_PLUGIN_DIR)")
	return cmd
}

func writePlugins(w io.Writer, args []string, dir string) error {
	var external []string
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("--plugin-dir: %w", err)
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil && !e.IsDir() && info.Mode()&0o111 != 0 {
				external = append(external, e.Name())
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSPEC\tDESCRIPTION")
	found := false
	for _, k := range pluginKinds {
		if len(args) == 1 && args[0] != k.kind {
			continue
		}
		found = true
		for _, info := range k.infos() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.kind, info.Name, orDash(info.Usage), orDash(info.Summary))
		}
		prefix := "weir-" + k.kind + "-"
		for _, name := range external {
			if n, ok := strings.CutPrefix(name, prefix); ok && n != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.kind, n, n+"[:key=value,...]", "external plugin "+filepath.Join(dir, name))
			}
		}
	}
	if !found {
		kinds := make([]string, 0, len(pluginKinds))
		for _, k := range pluginKinds {
			kinds = append(kinds, k.kind)
		}
		return fmt.Errorf("unknown plugin kind %q (known: %s)", args[0], strings.Join(kinds, ", "))
	}
	slices.Sort(external)
	return tw.Flush()
}

// Command sigkillhost is a test-only host: it opens a codec plugin through a
// host.Host, prints "pid N" (the plugin's process id) on stdout, and waits
// for its stdin to close. The host's tests SIGKILL it and check that the
// plugin does not outlive it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/weir-broker/weir/plugins/host"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sigkillhost:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: sigkillhost CODEC-PLUGIN-SPEC")
	}
	h := host.New(host.Config{})
	defer h.Close()
	if _, err := h.Codec(args[0]); err != nil {
		return err
	}
	procs := h.Processes()
	if len(procs) != 1 || procs[0].Pid == 0 {
		return fmt.Errorf("want one running plugin, have %v", procs)
	}
	if _, err := fmt.Fprintf(stdout, "pid %d\n", procs[0].Pid); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, stdin)
	return err
}

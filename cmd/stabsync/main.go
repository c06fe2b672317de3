// Command stabsync syncs a folder with a share of Stabilizer sites, both
// ways: a file is published once it stopped changing (a checkpoint
// directory as one commit when its marker appears), and a version written
// elsewhere becomes visible here only once it is stable under the share's
// visibility predicate. One stabsync per machine talks to its region's
// site; the engine is package fileshare/client.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/cmd/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors in how stabsync was called, which exit with 2.
type usageError struct{ error }

// run executes stabsync and returns its exit status: 0 on success, 1 when
// the command failed, 2 when it was called wrongly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	for _, line := range strings.Split(strings.ReplaceAll(err.Error(), "client: ", ""), "\n") {
		fmt.Fprintf(stderr, "stabsync: %s\n", line)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// globals are the flags every subcommand shares.
type globals struct {
	output  string
	timeout time.Duration
}

func (g *globals) checkOutput(allowed ...string) error {
	for _, a := range allowed {
		if g.output == a {
			return nil
		}
	}
	return usageError{fmt.Errorf("-o %q: unknown output format (known: %s)", g.output, strings.Join(allowed, ", "))}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Version: buildinfo.Read().String(),
		Use:     "stabsync",
		Short:   "Sync a folder with a share of Stabilizer sites",
		Long: `stabsync keeps a folder and a share of Stabilizer sites in step, both ways.

A file is published once its size and mtime stopped changing (the settle time), so a
file being written is never synced half-way; a share can publish a directory as one
version when a marker file appears in it (a checkpoint commit). A version written
elsewhere appears here only once it is stable under the share's visibility predicate
(default majority: it survives the loss of a region), and is written atomically.
Concurrent edits are both kept: the loser becomes a conflict copy, named the same at
every machine. Paths listed in .stabignore (gitignore syntax) are not synced.

Start with: stabsync init ./folder --share NAME --site HOST:PORT, then stabsync run ./folder.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 10*time.Second, "how long to wait for the site (not for run)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newInitCmd(g), newRunCmd(g), newStatusCmd(g), newWaitCmd(g), newVersionsCmd(g), newRestoreCmd(g), newConflictsCmd(g))
	return root
}

// exactArgs is cobra.ExactArgs with an error that says what is missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError{fmt.Errorf("%s takes %d argument(s) (%s), got %d; see %s --help",
				cmd.CommandPath(), len(names), strings.Join(names, " "), len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// folderArg takes an optional FOLDER argument, "." by default.
func folderArg(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError{fmt.Errorf("%s takes at most one argument (FOLDER), got %d; see %s --help",
			cmd.CommandPath(), len(args), cmd.CommandPath())}
	}
	return nil
}

func folderOf(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return "."
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

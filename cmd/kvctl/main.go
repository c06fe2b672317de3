// Command kvctl is the command-line client of Stabilizer, one binary for
// operators: it talks to stabilizerd sites (key/value store, pub/sub,
// cluster state) and evaluates stability-frontier predicates offline.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/cmd/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks errors in how kvctl was called, which exit with 2.
type usageError struct{ error }

// run executes kvctl and returns its exit status: 0 on success, 1 when the
// command failed, 2 when it was called wrongly.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "kvctl: %s\n", line)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// globals are the flags every subcommand shares.
type globals struct {
	output string
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
		Use:     "kvctl",
		Short:   "Client of Stabilizer sites: key/value store, pub/sub, predicates",
		Long: `kvctl is Stabilizer's client, one binary for operators: it talks to Stabilizer sites
(the key/value store: put, get, del, scan, watch, cas, lease; pub/sub: topic, pub, sub;
frontier, cluster status) and evaluates stability-frontier predicates.

A predicate states the consistency a write or read needs, as an expression
over a stream's acknowledgement table, e.g. "majority(persisted(sites))".
The language: docs/predicates.md in the repository, and kvctl predicate --help.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text, json or table")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	r := addRemote(root, g)
	pred := newPredicateCmd(g)
	pred.AddCommand(newPredicateRemoteCmds(g, r)...)
	root.AddCommand(pred)
	root.AddCommand(newKVCmds(g, r)...)
	root.AddCommand(newFrontierCmd(g, r), newClusterCmd(g, r), newCASCmd(g, r), newLeaseCmd(g, r))
	root.AddCommand(newTopicCmd(g, r), newPubCmd(g, r), newSubCmd(g, r))
	return root
}

// exactArgs is cobra.ExactArgs with an error that says what is missing and
// marks it as a usage error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError{fmt.Errorf("%s takes %d argument(s) (%s), got %d; see %s --help",
				cmd.CommandPath(), len(names), strings.Join(names, " "), len(args), cmd.CommandPath())}
		}
		return nil
	}
}

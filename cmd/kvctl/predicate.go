package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/frontier"
)

func newPredicateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "predicate",
		Short: "Check, evaluate and dualize stability-frontier predicates",
		Long: `Work with stability-frontier predicates offline, against an ack table in a JSON file:

  {
    "sites":  ["us-east-1", "us-west-2", "eu-west-1"],
    "groups": {"us": ["us-east-1", "us-west-2"], "eu": ["eu-west-1"]},
    "origin": "us-east-1",
    "self":   "eu-west-1",
    "acks": {
      "received":  {"us-east-1": 120, "us-west-2": 110, "eu-west-1": 90},
      "persisted": {"us-east-1": 118, "us-west-2": 100, "eu-west-1": 80},
      "verified":  {"eu-west-1": 75}
    }
  }

A site or level missing from "acks" counts as 0; every level in "acks" is known.
Built-in names: none, local, majority, all, one_remote.`,
	}
	var table string
	addTable := func(c *cobra.Command) {
		c.Flags().StringVar(&table, "table", "", "ack table JSON file (required)")
		_ = c.MarkFlagFilename("table", "json")
	}
	eval := &cobra.Command{
		Use:   "eval EXPR --table FILE",
		Short: "Print the frontier of a predicate over an ack table",
		Example: `  kvctl predicate eval 'majority(persisted(sites))' --table acks.json
  kvctl predicate eval one_remote --table acks.json -o json`,
		Args: exactArgs("EXPR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json", "table"); err != nil {
				return err
			}
			t, p, err := load(args[0], table)
			if err != nil {
				return err
			}
			return printEval(cmd.OutOrStdout(), g.output, t, p)
		},
	}
	check := &cobra.Command{
		Use:     "check EXPR --table FILE",
		Short:   "Compile a predicate against the table's sites, groups and levels",
		Example: `  kvctl predicate check 'min(persisted(origin), quorum(2, received(group("eu"))))' --table acks.json`,
		Args:    exactArgs("EXPR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			if _, _, err := load(args[0], table); err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]bool{"ok": true})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	dual := &cobra.Command{
		Use:   "dual EXPR --table FILE",
		Short: "Print the dual of a predicate: the read quorum that sees every write it acknowledged",
		Long: `Print the dual of a predicate for the table's origin and self: min and max swap and
k-of-n becomes (n-k+1)-of-n. A read that hears from a set of sites satisfying the dual
sees every write acknowledged under the predicate. With -o json it also gives the
dual's frontier over the table.`,
		Example: `  kvctl predicate dual majority --table acks.json`,
		Args:    exactArgs("EXPR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			t, p, err := load(args[0], table)
			if err != nil {
				return err
			}
			acks, origin, self := t.Flat(t.Schema())
			d := p.Dual()
			src := d.SourceAt(origin, self)
			if g.output == "json" {
				v, err := d.Eval(acks, origin, self)
				if err != nil {
					return err
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"dual": src, "frontier": v})
			}
			fmt.Fprintln(cmd.OutOrStdout(), src)
			return nil
		},
	}
	for _, c := range []*cobra.Command{eval, check, dual} {
		addTable(c)
		cmd.AddCommand(c)
	}
	return cmd
}

// load reads the table file and compiles the predicate against it.
func load(src, path string) (*frontier.TableFile, *frontier.Predicate, error) {
	if path == "" {
		return nil, nil, usageError{fmt.Errorf("--table FILE is required: the ack table to evaluate against (see kvctl predicate --help)")}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--table: %w", err)
	}
	t, err := frontier.ParseTable(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := frontier.Compile(src, t.Schema())
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

func printEval(w io.Writer, format string, t *frontier.TableFile, p *frontier.Predicate) error {
	s := t.Schema()
	acks, origin, self := t.Flat(s)
	v, err := p.Eval(acks, origin, self)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return writeJSON(w, map[string]uint64{"frontier": v})
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "LEVEL\t%s\n", strings.Join(s.Sites, "\t"))
		for l, name := range s.LevelNames() {
			row := make([]string, len(s.Sites))
			for i := range s.Sites {
				row[i] = fmt.Sprint(acks[l*len(s.Sites)+i])
			}
			fmt.Fprintf(tw, "%s\t%s\n", name, strings.Join(row, "\t"))
		}
		fmt.Fprintf(tw, "\norigin %s, self %s\n%s = %d\n", s.Sites[origin], s.Sites[self], p, v)
		return tw.Flush()
	}
	fmt.Fprintln(w, v)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

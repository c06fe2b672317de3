package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newFrontierCmd(g *globals, r *remote) *cobra.Command {
	var origin, stream string
	cmd := &cobra.Command{
		Use:   "frontier [--origin SITE] [--stream NAME]",
		Short: "Show a stream's ack table and the frontier of every predicate",
		Long: `Show, as the site at --endpoint knows it, the ack table of one stream (default: the
kv stream of that site) and how far each named predicate's frontier got.`,
		Example: `  kvctl frontier
  kvctl frontier --origin eu-west-1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := r.open("text", "table", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Admin.Frontier(ctx, &kvpb.FrontierRequest{Origin: origin, Stream: stream})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "stream %s/%s, head %d\n\n", res.Origin, res.Stream, res.Head)
			fmt.Fprintf(w, "LEVEL\t%s\n", strings.Join(res.Sites, "\t"))
			for _, row := range res.Acks {
				cells := make([]string, len(row.Seqs))
				for i, s := range row.Seqs {
					cells[i] = fmt.Sprint(s)
				}
				fmt.Fprintf(w, "%s\t%s\n", row.Level, strings.Join(cells, "\t"))
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "PREDICATE\tFRONTIER\tBEHIND\tVERSION")
			for _, f := range res.Frontiers {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", f.Predicate, f.Seq, res.Head-min(f.Seq, res.Head), f.Version)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&origin, "origin", "", "the stream's origin site (default: the site at --endpoint)")
	cmd.Flags().StringVar(&stream, "stream", "kv", "the stream's name")
	return cmd
}

func newPredicateRemoteCmds(g *globals, r *remote) []*cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List the named predicates a site knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := r.open("text", "table", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Admin.ListPredicates(ctx, &kvpb.ListPredicatesRequest{})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res.Predicates)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tPREDICATE")
			for _, p := range res.Predicates {
				fmt.Fprintf(w, "%s\t%d\t%s\n", p.Name, p.Version, p.Source)
			}
			return w.Flush()
		},
	}
	set := &cobra.Command{
		Use:   "set NAME EXPR",
		Short: "Define or change a named predicate at a site while data flows",
		Long: `Define or change a named predicate at the site at --endpoint. The change is versioned:
seqs already released stay released, and the new version releases only what it holds for.
Run it against every site whose writers or readers use the name.`,
		Example: `  kvctl predicate set durable 'kth_max(2, persisted(sites))'`,
		Args:    exactArgs("NAME", "EXPR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := r.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			defer cancel()
			res, err := c.Admin.SetPredicate(ctx, &kvpb.SetPredicateRequest{Name: args[0], Source: args[1]})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "version": res.Version})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is now version %d\n", args[0], res.Version)
			return nil
		},
	}
	return []*cobra.Command{list, set}
}

func newClusterCmd(g *globals, r *remote) *cobra.Command {
	cluster := &cobra.Command{Use: "cluster", Short: "Look at the cluster through one site"}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the sites, which are connected, and the streams a site holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := r.open("text", "table", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Admin.Status(ctx, &kvpb.StatusRequest{})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "site %s (asked at %s)\n\nSITE\tCONNECTION\n%s\tthis site\n", res.Site, r.endpoint, res.Site)
			for _, p := range res.Peers {
				state := "not connected"
				if p.Connected {
					state = "connected"
				}
				fmt.Fprintf(w, "%s\t%s\n", p.Site, state)
			}
			if l := res.Lin; l != nil {
				leader := l.Leader
				if leader == "" {
					leader = "none known"
				}
				fmt.Fprintf(w, "\nlinearizable keys under %s: raft voters %s, leader %s (term %d, this site %s), preferred %s\n",
					l.Prefix, strings.Join(l.Voters, ","), leader, l.Term, l.State, l.Preferred)
			}
			fmt.Fprintln(w, "\nSTREAM\tHEAD\tPERSISTED HERE")
			for _, s := range res.Streams {
				fmt.Fprintf(w, "%s/%s\t%d\t%d\n", s.Origin, s.Stream, s.Head, s.Persisted)
			}
			return w.Flush()
		},
	}
	retention := &cobra.Command{
		Use:   "retention",
		Short: "Show what a site keeps of each stream's log, and its disk use per application",
		Long: `Show, for the site at --endpoint, each stream's head, up to which seq it dropped
the log (retention truncates what every site applied; a site that lacks dropped
entries catches up from a peer's snapshot), how many entries it keeps and their
size on disk; then the store's disk use per application and any state transfer
in progress. Sizes are pebble's estimates: they leave out what is only in memory.`,
		Example: `  kvctl cluster retention
  kvctl cluster retention --endpoint eu.example:7001 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := r.open("text", "table", "json")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Admin.Status(ctx, &kvpb.StatusRequest{})
			if err != nil {
				return r.explain(err)
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), retentionJSON(res))
			}
			return printRetention(cmd.OutOrStdout(), res)
		},
	}
	cluster.AddCommand(status, retention)
	return cluster
}

func printRetention(out io.Writer, res *kvpb.StatusResponse) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "site %s, store %s on disk\n\nSTREAM\tHEAD\tDROPPED UP TO\tKEPT FROM\tENTRIES KEPT\tLOG ON DISK\t\n", res.Site, sizeText(res.DiskBytes))
	for _, s := range res.Streams {
		note := ""
		if s.Behind {
			note = "behind: catching up from a snapshot"
		}
		kept := s.Persisted - min(s.Truncated, s.Persisted)
		fmt.Fprintf(w, "%s/%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Origin, s.Stream, s.Head, s.Truncated, s.Truncated+1, kept, sizeText(s.LogBytes), note)
	}
	fmt.Fprintln(w, "\nAPPLICATION\tON DISK")
	for _, u := range res.Usage {
		fmt.Fprintf(w, "%s\t%s\n", u.Namespace, sizeText(u.Bytes))
	}
	for _, t := range res.Transfers {
		if t.Waiting != "" {
			fmt.Fprintf(w, "\nstate transfer of %s/%s: waiting for %s\n", t.Origin, t.Stream, t.Waiting)
			continue
		}
		fmt.Fprintf(w, "\nstate transfer of %s/%s from %s: %s of %s, continues after seq %d\n",
			t.Origin, t.Stream, t.Source, sizeText(t.Bytes), sizeText(t.TotalBytes), t.Position)
	}
	return w.Flush()
}

// retentionJSON is what -o json prints: the retention fields only.
func retentionJSON(res *kvpb.StatusResponse) map[string]any {
	return map[string]any{"site": res.Site, "disk_bytes": res.DiskBytes, "streams": res.Streams, "usage": res.Usage, "transfers": res.Transfers}
}

func sizeText(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/wan"
)

// The demo's group predicate: persisted on two continents, the writer's
// own counting as one — a copy survives the loss of any one continent.
const twoContinents = `kth_max(2, [max(persisted(group("us"))), max(persisted(group("eu"))), max(persisted(group("ap")))])`

func newDemoCmd(dir *string) *cobra.Command {
	var topology string
	var keep bool
	var per int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo: a three-region cluster, writes under several predicates, a region cut off and healed, job events over pub/sub",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := *dir
			if d == "" {
				var err error
				if d, err = os.MkdirTemp("", "wanbed-demo-"); err != nil {
					return err
				}
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), demoOptions{dir: d, topology: topology, keep: keep, perPred: per})
		},
	}
	cmd.Flags().StringVar(&topology, "topology", "ec2-3", "topology (three continents with groups us, eu, ap)")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the cluster running at the end")
	cmd.Flags().IntVar(&per, "writes", 12, "writes per region and predicate in the latency phase")
	return cmd
}

type demoOptions struct {
	dir, topology string
	keep          bool
	perPred       int
}

// section prints a section's title, in bold on a terminal and plain when
// the output goes to a file or a pipe (no escape codes in logs).
func section(w io.Writer, title string) {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		fmt.Fprintf(w, "\n\033[1m== %s ==\033[0m\n\n", title)
		return
	}
	fmt.Fprintf(w, "\n== %s ==\n\n", title)
}

func runDemo(ctx context.Context, w io.Writer, o demoOptions) (err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return err
	}
	for _, g := range []string{"us", "eu", "ap"} {
		if len(topo.Groups[g]) == 0 {
			return fmt.Errorf("the demo needs groups us, eu and ap; topology %s lacks %q", o.topology, g)
		}
	}
	section(w, "Starting "+topo.Name+": "+topo.Description)
	fmt.Fprintf(w, "round trips (%s):\n", topo.Source)
	for i, a := range topo.Sites {
		for _, b := range topo.Sites[i+1:] {
			rtt, _ := topo.RTT(a, b)
			fmt.Fprintf(w, "  %-16s <-> %-16s %6.1f ms\n", a, b, float64(rtt)/1e6)
		}
	}
	fmt.Fprintln(w)
	st, err := up(upOptions{topology: o.topology, dir: o.dir, progress: w,
		predicates: map[string]string{"two_continents": twoContinents, "durable": "min(persisted(sites))"}})
	if err != nil {
		if st != nil {
			_ = down(o.dir, w)
		}
		return err
	}
	if !o.keep {
		defer func() {
			section(w, "Stopping")
			if derr := down(o.dir, w); derr != nil && err == nil {
				err = derr
			}
			fmt.Fprintf(w, "everything stopped; configs, data and logs are in %s\n", leftBehind(o.dir))
		}()
	}
	preds := []string{"none", "one_remote", "majority", "two_continents", "all"}
	section(w, "Writing job records, checkpoint manifests and lineage edges from every region")
	fmt.Fprintf(w, "two_continents = %s\n\n", twoContinents)
	us, ap := topo.Groups["us"][0], topo.Groups["ap"][0]
	usSite := siteOf(st, us)
	c, err := kvclient.Dial(usSite.Client)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(w, "every second, the frontiers of %s's kv stream as %s sees them (seqs):\n", us, us)
	wl := &writers{st: st, topo: topo, predicates: []string{"none", "one_remote", "majority", twoContinents, "all"},
		perPred: o.perPred, timeout: 10 * time.Second, progress: w,
		live: func(ctx context.Context) string { return frontierLine(ctx, c, us) }}
	rows, err := wl.run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		if r.Predicate == twoContinents {
			r.Predicate = "two_continents"
		}
	}
	if err := printResults(w, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nBOUND is what the speed of light in the RTT matrix allows: the round trip to the nearest set of")
	fmt.Fprintln(w, "sites that satisfies the predicate. none and local pay only the local fsync. Each writer's first")
	fmt.Fprintln(w, "request, which dials its site, is left out; on a busy machine a few writes still wait for the CPU.")

	section(w, "The frontier table of "+us+"'s kv stream, as "+us+" sees it")
	if err := frontierTable(ctx, w, c, us); err != nil {
		return err
	}

	section(w, "Cutting "+ap+" off from every other region")
	if err := isolate(st.WAN.Control, topo, ap, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "links to and from %s pass nothing now; connections see silence, as in a real partition\n\n", ap)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PREDICATE\tWRITE FROM %s\t\n", us)
	for _, p := range append(preds, "durable") {
		src := p
		if p == "two_continents" {
			src = twoContinents
		}
		start := time.Now()
		_, err := c.Put(ctx, "jobs/demo-partition", []byte(`{"state":"running"}`), src, 2*time.Second)
		if err != nil {
			fmt.Fprintf(tw, "%s\tSTALLED: %s\t\n", p, status.Convert(err).Message())
		} else {
			fmt.Fprintf(tw, "%s\tdone in %.1f ms\t\n", p, ms(time.Since(start)))
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n(durable is a named predicate, configured as min(persisted(sites)).)")

	section(w, "Changing the stalled predicate `durable` at run time to majority(persisted(sites))")
	res, err := c.Admin.SetPredicate(ctx, &kvpb.SetPredicateRequest{Name: "durable", Source: "majority(persisted(sites))"})
	if err != nil {
		return fmt.Errorf("set predicate: %s", status.Convert(err).Message())
	}
	fmt.Fprintf(w, "durable is now version %d at %s; writes under it flow again:\n", res.Version, us)
	for i := range 3 {
		start := time.Now()
		r, err := c.Put(ctx, fmt.Sprintf("ckpt/demo/%d", i), []byte("manifest"), "durable", 5*time.Second)
		if err != nil {
			return fmt.Errorf("write under the changed predicate: %s", status.Convert(err).Message())
		}
		fmt.Fprintf(w, "  write seq %d under durable: %.1f ms\n", r.Seq, ms(time.Since(start)))
	}
	fmt.Fprintln(w, "Seqs released under version 1 stay released; the new version releases only what it holds for.")

	section(w, "Restoring "+ap+": the stalled `all` frontier catches up")
	if err := isolate(st.WAN.Control, topo, ap, false); err != nil {
		return err
	}
	if err := watchCatchUp(ctx, w, c, us); err != nil {
		return err
	}
	if err := pubsubScene(ctx, w, st, topo); err != nil {
		return err
	}
	// The closing act: the moment everything above exists for, shortened.
	if err := runTraining(ctx, w, o.dir, st, topo, demoTraining); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n(the timing target above is set for full-size checkpoints: the demo's are %d MiB, whose bound is a fraction\n"+
		"of a second, beside which a commit's fixed costs, such as the %v a file must stand still before it is hashed,\n"+
		"weigh heavily; make scenario runs the full sizes)\n", int64(demoTraining.shards)*demoTraining.shardBytes>>20, trainingSettle)
	return nil
}

// demoTraining is the training scenario (wanbed scenario training) cut to
// fit the demo: two small checkpoints before the region is lost.
var demoTraining = trainingOptions{checkpoints: 2, shards: 4, shardBytes: 2 << 20, writeRate: 16 << 20,
	interval: 500 * time.Millisecond, ttl: 3 * time.Second, predicate: "two_continents",
	topic: "training.events", share: "ckpt", job: "job-7"}

// frontierLine is one line of a stream's frontiers: head and each predicate.
func frontierLine(ctx context.Context, c *kvclient.Client, origin string) string {
	res, err := c.Admin.Frontier(ctx, &kvpb.FrontierRequest{Origin: origin, Stream: kvpb.Stream})
	if err != nil {
		return status.Convert(err).Message()
	}
	parts := []string{fmt.Sprintf("head %-4d", res.Head)}
	for _, f := range res.Frontiers {
		if f.Predicate == "local" || f.Predicate == "durable" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", f.Predicate, f.Seq))
	}
	return strings.Join(parts, " | ")
}

func siteOf(st *state, name string) siteState {
	for _, s := range st.Sites {
		if s.Site == name {
			return s
		}
	}
	return siteState{}
}

func frontierTable(ctx context.Context, w io.Writer, c *kvclient.Client, origin string) error {
	res, err := c.Admin.Frontier(ctx, &kvpb.FrontierRequest{Origin: origin, Stream: kvpb.Stream})
	if err != nil {
		return errors.New(status.Convert(err).Message())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "head %d\n\nLEVEL\t%s\t\n", res.Head, strings.Join(res.Sites, "\t"))
	for _, row := range res.Acks {
		if row.Level == "received" {
			continue
		}
		var cells []string
		for _, s := range row.Seqs {
			cells = append(cells, fmt.Sprint(s))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", row.Level, strings.Join(cells, "\t"))
	}
	fmt.Fprintln(tw, "\nPREDICATE\tFRONTIER\tBEHIND HEAD\t")
	for _, f := range res.Frontiers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", f.Predicate, f.Seq, res.Head-min(f.Seq, res.Head))
	}
	return tw.Flush()
}

// watchCatchUp prints the `all` frontier until it reaches the head.
func watchCatchUp(ctx context.Context, w io.Writer, c *kvclient.Client, origin string) error {
	deadline := time.Now().Add(30 * time.Second)
	start := time.Now()
	var last uint64 = ^uint64(0)
	for time.Now().Before(deadline) {
		res, err := c.Admin.Frontier(ctx, &kvpb.FrontierRequest{Origin: origin, Stream: kvpb.Stream})
		if err != nil {
			return errors.New(status.Convert(err).Message())
		}
		var all uint64
		for _, f := range res.Frontiers {
			if f.Predicate == "all" {
				all = f.Seq
			}
		}
		if all != last {
			fmt.Fprintf(w, "  %6.0f ms after restore: all = %d of head %d\n", ms(time.Since(start)), all, res.Head)
			last = all
		}
		if all >= res.Head {
			fmt.Fprintln(w)
			return frontierTable(ctx, w, c, origin)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the all frontier did not catch up within 30s of the restore")
}

// leftBehind says what a stopped run leaves on disk: the folder, its size
// as du counts it (allocated blocks), and how to remove it.
func leftBehind(dir string) string {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += fi.Size()
			}
		}
		return nil
	})
	return fmt.Sprintf("%s (%.1f MiB on disk; rm -rf %s removes it)", dir, float64(n)/(1<<20), dir)
}

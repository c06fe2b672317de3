package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/wan"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(os.Stderr, "wanbench: %s\n", line)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "wanbench",
		Short: "Benchmarks over the emulated WAN, side by side with the RTT bound and peer systems",
		Long: `wanbench runs our KV against the lower bound of the round-trip matrix and against peer
systems (etcd, NATS JetStream) on the testbed wanbed builds. It drives the binaries beside it
(wanbed, stabilizerd, benchpeers), or those on PATH.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var o benchOptions
	var skip string
	var inflight []int
	kvCmd := &cobra.Command{
		Use:   "kv --topology ec2-5 --out DIR",
		Short: "Write latency per predicate and region against the bound, Raft and etcd; loopback throughput against etcd and NATS",
		Long: `Runs, in one go:
  1. on the emulated WAN of the topology, a client in every region writing in a closed loop
     to its own site: our KV under local, one_remote, majority, all and other_continent
     (persisted on at least one other continent), our linearizable mode (Raft, leader in
     the first site), and a real etcd cluster (one member per region, each in its own network
     namespace so that its peer traffic crosses the emulated links);
  2. on loopback, 3 sites, no emulated delay: writes/s with every write fsynced at a majority
     before its ack, for our KV (majority), our linearizable mode, etcd and NATS JetStream KV
     (R3, sync_interval: always), at each --inflight.
Writes DIR/results.json, DIR/latencies.json, DIR/report.md and PNG plots.`,
		Example: `  wanbench kv --topology ec2-5 --out /tmp/bench
  wanbench kv --out /tmp/bench --writes 30 --skip throughput`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.out == "" {
				return errors.New("--out DIR is required")
			}
			o.skip = map[string]bool{}
			for _, s := range strings.FieldsFunc(skip, func(r rune) bool { return r == ',' || r == ';' }) {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				if !slices.Contains([]string{"wan", "etcd", "lin", "nats", "throughput"}, s) {
					return fmt.Errorf("--skip %q: unknown part (known: wan, etcd, lin, nats, throughput)", s)
				}
				o.skip[s] = true
			}
			if o.writes < 1 {
				return errors.New("--writes must be at least 1")
			}
			for _, c := range o.conns {
				if c < 1 {
					return fmt.Errorf("--conns %d: must be at least 1", c)
				}
			}
			if len(o.conns) == 0 {
				return errors.New("--conns: give at least one connection count")
			}
			o.inflight = inflight
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, o)
		},
	}
	kvCmd.Flags().StringVar(&o.topology, "topology", "ec2-5", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	kvCmd.Flags().StringVar(&o.out, "out", "", "folder for results.json, report.md and the plots (required)")
	kvCmd.Flags().IntVar(&o.writes, "writes", 100, "measured writes per system, predicate and region on the WAN")
	kvCmd.Flags().IntVar(&o.warmup, "warmup", 2, "unmeasured writes per system, predicate and region first")
	kvCmd.Flags().DurationVar(&o.tputDuration, "tput-duration", 8*time.Second, "measured window of each throughput run")
	kvCmd.Flags().IntSliceVar(&inflight, "inflight", []int{64, 256}, "writes in flight in the throughput runs")
	kvCmd.Flags().IntSliceVar(&o.conns, "conns", []int{1, 4}, "client connections per site (or member) in the throughput runs; every system runs at each, compared at its best")
	kvCmd.Flags().IntVar(&o.valueBytes, "value-bytes", 256, "value size in the throughput runs")
	kvCmd.Flags().StringVar(&skip, "skip", "", "parts to leave out: wan, etcd, lin, nats, throughput (comma-separated)")
	kvCmd.Flags().BoolVar(&o.keepWork, "keep-work", false, "keep the clusters' data and logs in DIR/work")

	var reportDir string
	reportCmd := &cobra.Command{
		Use:   "report --out DIR",
		Short: "Rewrite DIR/report.md and the plots from DIR/results.json and DIR/latencies.json",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reportDir == "" {
				return errors.New("--out DIR is required")
			}
			res, err := loadBenchResults(reportDir)
			if err != nil {
				return err
			}
			return writeBenchOutputs(reportDir, res)
		},
	}
	reportCmd.Flags().StringVar(&reportDir, "out", "", "the folder of an earlier bench run")
	root.AddCommand(kvCmd, reportCmd)
	return root
}

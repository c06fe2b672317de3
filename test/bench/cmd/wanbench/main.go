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
		Long: `wanbench runs our KV and our pub/sub against the lower bound of the round-trip matrix and
against peer systems (etcd, NATS JetStream) on the testbed wanbed builds. It drives the binaries
beside it (wanbed, stabilizerd, benchpeers), or those on PATH.`,
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

	root.AddCommand(newPubSubCmd(), newFilesCmd(), newSoakCmd(), newWipeCmd())

	var reportDir string
	reportCmd := &cobra.Command{
		Use:   "report --out DIR",
		Short: "Rewrite DIR/report.md and the plots from DIR/results.json and DIR/latencies.json (of wanbench kv, pubsub, files, soak or wipe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reportDir == "" {
				return errors.New("--out DIR is required")
			}
			kind, err := benchKind(reportDir)
			if err != nil {
				return err
			}
			if kind == wipeBenchName {
				res, err := loadWipeResults(reportDir)
				if err != nil {
					return err
				}
				return writeWipeOutputs(reportDir, res)
			}
			if kind == soakBenchName {
				res, err := loadSoakResults(reportDir)
				if err != nil {
					return err
				}
				return writeSoakOutputs(reportDir, res)
			}
			if kind == fsBenchName {
				res, err := loadFSResults(reportDir)
				if err != nil {
					return err
				}
				return writeFSOutputs(reportDir, res)
			}
			if kind == psBenchName {
				res, err := loadPSResults(reportDir)
				if err != nil {
					return err
				}
				return writePSOutputs(reportDir, res)
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

func newPubSubCmd() *cobra.Command {
	o := newPubSubCmdOptions()
	var skip, bw string
	cmd := &cobra.Command{
		Use:   "pubsub --topology ec2-3 --out DIR",
		Short: "Our pub/sub against NATS JetStream: publish-ack and delivery on the WAN, a degraded link, loopback throughput, memory",
		Long: `Runs, in one go, side by side with NATS JetStream (an R3 stream across the regions, sync_interval:
always, its leader placed in each region in turn; its servers each in a network namespace so that
their routes cross the same emulated links; needs root):
  1. on the emulated WAN, a publisher in every region: publish-ack latency under our majority and
     audience (durable subscribers in --subscribers) and NATS at each leader placement, each beside
     its bound; cross-region delivery to a durable subscriber in every region, ours under
     "persisted at the subscriber's site" and majority;
  2. the links of the regions without subscribers slowed to --degrade-bw and --degrade-delay more
     one way while publishing goes on: ours under audience and all, NATS;
  3. on loopback, 3 sites: async publishing of --bytes messages at each --inflight, every message
     fsynced at a majority before its ack, one durable subscriber per site;
  4. on loopback, publishing at full rate while a durable subscriber stops acking for --stall:
     every site's RSS over time.
Writes DIR/results.json, DIR/latencies.json, DIR/report.md and PNG plots, every target marked met,
missed or not measured.`,
		Example: `  wanbench pubsub --topology ec2-3 --out /tmp/pubsub
  wanbench pubsub --out /tmp/pubsub --publishes 10 --degrade-window 5s --tput-duration 2s --stall 10s --skip ours`,
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
				if !slices.Contains(psParts, s) {
					return fmt.Errorf("--skip %q: unknown part (known: %s)", s, strings.Join(psParts, ", "))
				}
				o.skip[s] = true
			}
			var errs []error
			if o.publishes < 1 {
				errs = append(errs, fmt.Errorf("--publishes %d: must be at least 1", o.publishes))
			}
			if o.warmup < 0 {
				errs = append(errs, fmt.Errorf("--warmup %d: must not be negative", o.warmup))
			}
			if len(o.inflight) == 0 {
				errs = append(errs, errors.New("--inflight: give at least one count"))
			}
			for _, n := range o.inflight {
				if n < 1 {
					errs = append(errs, fmt.Errorf("--inflight %d: must be at least 1", n))
				}
			}
			for _, d := range []struct {
				name string
				v    time.Duration
			}{{"--degrade-window", o.degradeWindow}, {"--tput-duration", o.tputWindow}, {"--stall", o.stall}, {"--rss-every", o.rssEvery}} {
				if d.v <= 0 {
					errs = append(errs, fmt.Errorf("%s %v: must be positive", d.name, d.v))
				}
			}
			b, err := wan.ParseBandwidth(bw)
			if err != nil || b <= 0 {
				errs = append(errs, fmt.Errorf("--degrade-bw %q: want a rate such as 1MB/s", bw))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if o.natsConsumers != "stream" && o.natsConsumers != "subscriber" {
				return fmt.Errorf("--nats-consumers %q: want stream or subscriber", o.natsConsumers)
			}
			o.degradeBW = b
			o.tputWarm = o.tputWindow / 4
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPubSub(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topology, "topology", "ec2-3", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	f.StringVar(&o.out, "out", "", "folder for results.json, report.md and the plots (required)")
	f.IntVar(&o.publishes, "publishes", 40, "measured publishes per system, predicate (or NATS leader) and region on the WAN")
	f.IntVar(&o.warmup, "warmup", 3, "unmeasured publishes before them")
	f.StringSliceVar(&o.subscribers, "subscribers", nil, "regions of the audience's subscribers (default: the two sites closest to each other)")
	f.DurationVar(&o.degradeWindow, "degrade-window", 12*time.Second, "publishing on healthy links, then as long on degraded ones")
	f.DurationVar(&o.degradeAdd, "degrade-delay", 500*time.Millisecond, "one-way delay added to the links of the regions without subscribers")
	f.StringVar(&bw, "degrade-bw", "1MB/s", "bandwidth of those links while degraded")
	f.DurationVar(&o.tputWindow, "tput-duration", 8*time.Second, "measured window of each throughput run (after a quarter of it of warm-up)")
	f.IntSliceVar(&o.inflight, "inflight", []int{64, 256}, "publishes in flight in the throughput runs (the memory phase uses the largest)")
	f.IntVar(&o.bytes, "bytes", 256, "message size")
	f.DurationVar(&o.stall, "stall", 60*time.Second, "how long the memory phase's subscriber stops acking")
	f.DurationVar(&o.stallBefore, "stall-before", 10*time.Second, "publishing in the memory phase before the stall")
	f.DurationVar(&o.stallAfter, "stall-after", 10*time.Second, "and after it")
	f.DurationVar(&o.rssEvery, "rss-every", 500*time.Millisecond, "RSS sampling interval")
	f.StringVar(&o.natsConsumers, "nats-consumers", o.natsConsumers, "where NATS's durable consumers are led on the WAN: subscriber (in the subscriber's region) or stream (with the stream's leader)")
	f.StringVar(&skip, "skip", "", "parts to leave out: "+strings.Join(psParts, ", ")+" (comma-separated)")
	f.BoolVar(&o.keepWork, "keep-work", false, "keep the clusters' data and logs in DIR/work")
	return cmd
}

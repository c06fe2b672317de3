package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/wan"
)

func newScenarioCmd(dir *string) *cobra.Command {
	scenario := &cobra.Command{Use: "scenario", Short: "Run a scenario of the training platform end to end"}
	var topology string
	var keep bool
	var shardMiB, rateMiB int64
	o := trainingOptions{predicate: "two_continents", topic: "training.events", share: "ckpt", job: "job-7"}
	cmd := &cobra.Command{
		Use:   "training",
		Short: "A region is lost while a job writes a checkpoint; the job resumes elsewhere from the newest stable one",
		Long: `training starts a cluster (real processes over the emulated WAN) and runs a training job in the
first region of group us: its scheduler holds the job's lease (linearizable mode, fencing token),
its trainer writes checkpoints through stabsync (a directory committed by its marker, visible
elsewhere once stable on two continents), then their lineage and manifest in the KV, and
publishes job events. Halfway through a checkpoint's shards every process of the region is
killed with SIGKILL and its links are cut. The standby scheduler in group eu takes the lease,
finds the newest stable checkpoint, verifies its shards' hashes, audits its lineage with
snapshot reads and resumes the job; a dashboard in group ap checks each event against the
record it announces. The region comes back: its old scheduler's write with its stale token
must be refused, its site catches up, the half-written checkpoint must never have become
visible. It prints the timeline, the figures and the checks, and exits 1 if a check failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.checkpoints < 1 || o.shards < 2 || shardMiB < 1 || rateMiB < 1 {
				return errors.New("--checkpoints must be at least 1, --shards at least 2, --shard-mib and --write-rate-mib at least 1")
			}
			if o.ttl < time.Second || o.interval < 0 {
				return errors.New("--ttl must be at least 1s and --interval not negative")
			}
			o.shardBytes, o.writeRate = shardMiB<<20, rateMiB<<20
			d := *dir
			if d == "" {
				var err error
				if d, err = os.MkdirTemp("", "wanbed-training-"); err != nil {
					return err
				}
			}
			return scenarioTraining(cmd, d, topology, keep, o)
		},
	}
	cmd.Flags().StringVar(&topology, "topology", "ec2-3", "topology (groups us, eu and ap)")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the cluster running at the end")
	cmd.Flags().IntVar(&o.checkpoints, "checkpoints", 3, "checkpoints committed before the region is lost")
	cmd.Flags().IntVar(&o.shards, "shards", 4, "shards per checkpoint")
	cmd.Flags().Int64Var(&shardMiB, "shard-mib", 4, "MiB per shard")
	cmd.Flags().Int64Var(&rateMiB, "write-rate-mib", 32, "MiB/s at which the trainer writes shards")
	cmd.Flags().DurationVar(&o.interval, "interval", time.Second, "training time between checkpoints")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 4*time.Second, "the job lease's TTL")
	cmd.Flags().StringVar(&o.bandwidth, "bw", "25MB/s", "every link's bandwidth (\"\" keeps the topology's)")
	scenario.AddCommand(cmd)
	return scenario
}

func scenarioTraining(cmd *cobra.Command, dir, topology string, keep bool, o trainingOptions) (err error) {
	w := cmd.OutOrStdout()
	topo, err := wan.OpenTopology(topology)
	if err != nil {
		return err
	}
	for _, g := range []string{"us", "eu", "ap"} {
		if len(topo.Groups[g]) == 0 {
			return fmt.Errorf("the scenario needs groups us, eu and ap; topology %s lacks %q", topology, g)
		}
	}
	section(w, "Starting "+topo.Name+": "+topo.Description)
	st, err := up(upOptions{topology: topology, dir: dir, progress: w, predicates: map[string]string{"two_continents": twoContinents}})
	if err != nil {
		if st != nil {
			_ = down(dir, w)
		}
		return err
	}
	if !keep {
		defer func() {
			section(w, "Stopping")
			if derr := down(dir, w); derr != nil && err == nil {
				err = derr
			}
			fmt.Fprintf(w, "everything stopped; configs, data, logs and the agents' events are in %s\n", leftBehind(dir))
		}()
	}
	return runTraining(cmd.Context(), w, dir, st, topo, o)
}

// Command wanbed runs a whole multi-region Stabilizer cluster on one
// machine: one stabilizerd per site, every pair of sites connected through
// emulated wide-area links (delay, jitter, bandwidth, loss, cuts), and
// drives workloads and the demo against it.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/cmd/internal/buildinfo"
	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
	"github.com/stabilizer/stabilizer/wan"
)

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(os.Stderr, "wanbed: %s\n", line)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var dir, output string
	root := &cobra.Command{
		Version: buildinfo.Read().String(),
		Use:     "wanbed",
		Short:   "A multi-region Stabilizer cluster on one machine, over an emulated WAN",
		Long: `wanbed starts one stabilizerd per site of a topology, connects every pair through
emulated links with the topology's round-trip times, changes links while the cluster runs,
and drives workloads against it. Topologies: ` + strings.Join(wan.PresetNames(), ", ") + `, or a YAML file.`,
		Example: `  wanbed up --topology ec2-3 --dir /tmp/bed -o json
  wanbed status --dir /tmp/bed
  wanbed link set --dir /tmp/bed us-east-1 eu-west-1 --cut
  wanbed run --dir /tmp/bed --duration 20s
  wanbed down --dir /tmp/bed`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&dir, "dir", "", "the testbed's folder: configs, data, logs, state (required)")
	root.PersistentFlags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	needDir := func() error {
		if dir == "" {
			return errors.New("--dir DIR is required")
		}
		if output != "text" && output != "json" {
			return fmt.Errorf("-o %q: unknown output format (known: text, json)", output)
		}
		return nil
	}
	var topology, stabd, preds string
	upCmd := &cobra.Command{
		Use:   "up --topology NAME|FILE --dir DIR",
		Short: "Start the WAN and one stabilizerd per site",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(); err != nil {
				return err
			}
			pm, err := siteconfig.ParsePredicates("--predicates", preds)
			if err != nil {
				return err
			}
			progress := cmd.ErrOrStderr()
			st, err := up(upOptions{topology: topology, dir: dir, stabd: stabd, predicates: pm, progress: progress})
			if err != nil {
				if st != nil {
					_ = down(dir, progress)
				}
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), st.Sites)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "testbed up in %s: %d sites over %s\n", dir, len(st.Sites), topology)
			return nil
		},
	}
	upCmd.Flags().StringVar(&topology, "topology", "ec2-3", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	upCmd.Flags().StringVar(&stabd, "stabilizerd", "", "the stabilizerd binary (default: beside wanbed, then PATH)")
	upCmd.Flags().StringVar(&preds, "predicates", "", "named predicates for every site, e.g. 'far=max(persisted(except(sites, origin)))'; separate with ;")
	statusCmd := &cobra.Command{
		Use:   "status --dir DIR",
		Short: "Show the sites, their health and the links",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(); err != nil {
				return err
			}
			return showStatus(cmd.OutOrStdout(), dir, output)
		},
	}
	downCmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Stop every process the testbed started (data and logs stay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(); err != nil {
				return err
			}
			if err := down(dir, cmd.ErrOrStderr()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "testbed in %s stopped; its data and logs are still there\n", dir)
			return nil
		},
	}
	serve := &cobra.Command{
		Use:    "serve-wan",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(*cobra.Command, []string) error { return serveWAN(dir, topology) },
	}
	serve.Flags().StringVar(&topology, "topology", "", "")
	root.AddCommand(upCmd, statusCmd, downCmd, newLinkCmd(&dir, needDir), newSiteCmd(&dir, needDir), serve, newRunCmd(&dir, needDir), newDemoCmd(&dir), newScenarioCmd(&dir), newAgentCmd())
	root.AddCommand(newMovedBenchCmd())
	return root
}

// newMovedBenchCmd answers `wanbed bench ...`: the side-by-side benchmark
// is a module of its own (test/bench), so that this module requires no
// peer system's server.
func newMovedBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "bench",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench moved to its own module, test/bench: run make bench, or bin/wanbench kv --topology ec2-5 --out DIR (make build builds it)")
		},
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func showStatus(w io.Writer, dir, output string) error {
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	type siteOut struct {
		siteState
		Running bool `json:"running"`
		Healthy bool `json:"healthy"`
	}
	var sites []siteOut
	for _, s := range st.Sites {
		o := siteOut{siteState: s, Running: alive(s.PID)}
		c := http.Client{Timeout: time.Second}
		if resp, err := c.Get("http://" + s.HTTP + "/healthz"); err == nil {
			o.Healthy = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		sites = append(sites, o)
	}
	links, linkErr := getLinks(st.WAN.Control)
	if output == "json" {
		return writeJSON(w, map[string]any{"topology": st.Topology, "sites": sites, "links": links, "wan_running": alive(st.WAN.PID)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "topology %s, started %s\n\nSITE\tPID\tSTATE\tCLIENT\tSTATUS PAGE\n", st.Topology, st.Started.Format(time.RFC3339))
	for _, s := range sites {
		state := "stopped"
		if s.Running {
			state = "running, not answering"
			if s.Healthy {
				state = "healthy"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\thttp://%s/\n", s.Site, s.PID, state, s.Client, s.HTTP)
	}
	if linkErr != nil {
		fmt.Fprintf(tw, "\nlinks: %v\n", linkErr)
		return tw.Flush()
	}
	fmt.Fprintln(tw, "\nLINK\tDELAY\tJITTER\tBANDWIDTH\tLOSS\tSTATE")
	for _, l := range links {
		state := "up"
		if l.Cut {
			state = "CUT"
		}
		fmt.Fprintf(tw, "%s -> %s\t%.1fms\t%.1fms\t%s\t%.2f%%\t%s\n", l.From, l.To, l.DelayMs, l.JitterMs, l.Bandwidth, l.Loss*100, state)
	}
	return tw.Flush()
}

func newLinkCmd(dir *string, needDir func() error) *cobra.Command {
	link := &cobra.Command{Use: "link", Short: "Change emulated links while the cluster runs"}
	var rtt, delay, jitter time.Duration
	var bw, loss string
	var cut, restore, oneWay bool
	set := &cobra.Command{
		Use:   "set --dir DIR A B [--rtt D | --delay D] [--jitter D] [--bw RATE] [--loss P%] [--cut | --restore]",
		Short: "Change the links between sites A and B (both directions unless --one-way)",
		Example: `  wanbed link set --dir /tmp/bed us-east-1 eu-west-1 --rtt 300ms
  wanbed link set --dir /tmp/bed us-east-1 eu-west-1 --bw 5MB/s --loss 1%
  wanbed link set --dir /tmp/bed us-east-1 ap-northeast-1 --cut
  wanbed link set --dir /tmp/bed us-east-1 ap-northeast-1 --restore`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needDir(); err != nil {
				return err
			}
			st, err := loadState(*dir)
			if err != nil {
				return err
			}
			var ch linkChange
			if cmd.Flags().Changed("rtt") {
				ms := float64(rtt) / 2 / 1e6
				ch.DelayMs = &ms
			}
			if cmd.Flags().Changed("delay") {
				ms := float64(delay) / 1e6
				ch.DelayMs = &ms
			}
			if cmd.Flags().Changed("jitter") {
				ms := float64(jitter) / 1e6
				ch.JitterMs = &ms
			}
			if bw != "" {
				if _, err := wan.ParseBandwidth(bw); err != nil {
					return fmt.Errorf("--bw: %w", err)
				}
				ch.Bandwidth = &bw
			}
			if loss != "" {
				l, err := wan.ParseLoss(loss)
				if err != nil {
					return fmt.Errorf("--loss: %w", err)
				}
				ch.Loss = &l
			}
			if cut && restore {
				return errors.New("--cut and --restore: choose one")
			}
			if cut || restore {
				ch.Cut = &cut
			}
			if ch == (linkChange{}) {
				return errors.New("nothing to change: give --rtt, --delay, --jitter, --bw, --loss, --cut or --restore")
			}
			pairs := [][2]string{{args[0], args[1]}}
			if !oneWay {
				pairs = append(pairs, [2]string{args[1], args[0]})
			}
			for _, p := range pairs {
				v, err := postLink(st.WAN.Control, p[0], p[1], ch)
				if err != nil {
					return err
				}
				state := ""
				if v.Cut {
					state = " CUT"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s -> %s: delay %.1fms jitter %.1fms bw %s loss %.2f%%%s\n", v.From, v.To, v.DelayMs, v.JitterMs, v.Bandwidth, v.Loss*100, state)
			}
			return nil
		},
	}
	set.Flags().DurationVar(&rtt, "rtt", 0, "round-trip time; each direction gets half")
	set.Flags().DurationVar(&delay, "delay", 0, "one-way delay of each direction")
	set.Flags().DurationVar(&jitter, "jitter", 0, "jitter of each direction")
	set.Flags().StringVar(&bw, "bw", "", "bandwidth, e.g. 5MB/s (0: unlimited)")
	set.Flags().StringVar(&loss, "loss", "", "segment loss, e.g. 1%")
	set.Flags().BoolVar(&cut, "cut", false, "pass nothing (connections see silence, then time out)")
	set.Flags().BoolVar(&restore, "restore", false, "undo --cut")
	set.Flags().BoolVar(&oneWay, "one-way", false, "change only A -> B")
	set.MarkFlagsMutuallyExclusive("rtt", "delay")
	link.AddCommand(set)
	return link
}

// Command stabilizerd runs one Stabilizer site: it replicates the site's
// streams to every other site, serves the key/value API and the HTTP
// status, metrics and health endpoints.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/cmd/internal/buildinfo"
	"github.com/stabilizer/stabilizer/cmd/internal/kubegen"
	"github.com/stabilizer/stabilizer/cmd/internal/site"
	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
	"github.com/stabilizer/stabilizer/wan"
)

func main() {
	setGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent replaces Go's 100 unless GOGC is set. A site's Go heap
// is small (pebble keeps its memtables and cache outside it): about 7 MB
// in use at 20,000 writes/s on three loopback sites, so at 100 the
// collector ran 32 times a second. At 400 it runs 7 times, the heap in use
// is about 14 MB, and the same load costs about 20% less CPU per write
// (writes/s 22-23k at 100 and 26-29k at 200-400, alternating runs).
const defaultGCPercent = 400

// defaultMemoryLimit caps the Go heap's growth unless GOMEMLIMIT is set:
// at 400 a heap that churns through file chunks (1 MiB buffers, 60 MB in
// use) grew to five times that before a collection, and a site syncing a
// 2 GiB file reached 0.7-1 GB of RSS. Under the limit the collector runs
// earlier only when the heap nears it, so a KV site's small heap keeps the
// cheap setting above.
const defaultMemoryLimit = 192 << 20

func setGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "stabilizerd: %s\n", line)
		}
		return 1
	}
	return 0
}

func newRoot(stderr io.Writer) *cobra.Command {
	var configPath string
	root := &cobra.Command{
		Version: buildinfo.Read().String(),
		Use:     "stabilizerd --config FILE",
		Short:   "Run one Stabilizer site",
		Long: `stabilizerd runs one site of a Stabilizer cluster from its config file.

To try a local three-site cluster:

  stabilizerd genconfig --sites us-east-1,eu-west-1,ap-south-1 --dir /tmp/stab
  stabilizerd --config /tmp/stab/us-east-1.yaml &
  stabilizerd --config /tmp/stab/eu-west-1.yaml &
  stabilizerd --config /tmp/stab/ap-south-1.yaml &

SIGTERM or SIGINT shut the site down gracefully: requests in progress finish,
pebble is flushed and closed.

The Go collector runs at GOGC=400 unless GOGC is set: the site's Go heap is
small (pebble's memtables and cache live outside it), and at Go's default of
100 collection cost a fifth of the CPU of a write.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return errors.New("--config FILE is required (make one with: stabilizerd genconfig --help)")
			}
			return serve(configPath, stderr)
		},
	}
	root.Flags().StringVar(&configPath, "config", "", "the site's YAML config file")
	_ = root.MarkFlagFilename("config", "yaml", "yml")
	root.AddCommand(newGenconfig(), newCheck(), newHealth())
	return root
}

func serve(path string, stderr io.Writer) error {
	cfg, err := siteconfig.Load(path)
	if err != nil {
		return err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: cfg.Site, Level: hclog.LevelFromString(cfg.LogLevel), Output: stderr})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := site.Start(cfg, log)
	if err != nil {
		return fmt.Errorf("start %s: %w", cfg.Site, err)
	}
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func newGenconfig() *cobra.Command {
	var sites, groups, dir, output, preds, topology, kube, image string
	var addresses []string
	cmd := &cobra.Command{
		Use:   "genconfig (--sites A,B,C | --topology NAME|FILE) (--dir DIR | --kubernetes DIR)",
		Short: "Write a config file per site: a local cluster on loopback ports, or Kubernetes overlays",
		Long: `genconfig writes one config file per site.

With --dir, for a local cluster: every site listens on free loopback ports,
data in DIR/<site>, plaintext (insecure: true).

With --kubernetes DIR, for Kubernetes: DIR/<region>/ gets a Kustomize overlay
of the base in DIR/../../base (deploy/k8s/base): kustomization.yaml,
namespace.yaml and site.yaml, the site's config, which the overlay makes the
ConfigMap the pod mounts. One namespace per region; peers are addressed as
stabilizer-0.stabilizer-peers.<region>.svc.cluster.local unless --address
gives a region's host (one cluster per region). The sites use mutual TLS
with the files of the Secret stabilizer-tls. Files there are replaced.

Sites and groups come from --sites and --groups, or from a WAN topology
(--topology ec2-3, a preset, or a topology file).`,
		Example: `  stabilizerd genconfig --sites us-east-1,eu-west-1,ap-south-1 --groups us=us-east-1,eu=eu-west-1,ap=ap-south-1 --dir /tmp/stab -o json
  stabilizerd genconfig --sites a,b,c --predicates 'two=kth_max(2, persisted(sites))' --dir /tmp/stab
  stabilizerd genconfig --topology ec2-3 --kubernetes deploy/k8s/overlays
  stabilizerd genconfig --topology ec2-3 --kubernetes deploy/k8s/overlays --address us-east-1=stab.us.example.com --image registry.example.com/stabilizer:v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: unknown output format (known: text, json)", output)
			}
			siteList, groupMap, err := genSites(sites, groups, topology)
			if err != nil {
				return err
			}
			predMap, err := siteconfig.ParsePredicates("--predicates", preds)
			if err != nil {
				return err
			}
			if kube != "" {
				if dir != "" {
					return errors.New("--dir and --kubernetes: give one (a loopback cluster, or Kubernetes overlays)")
				}
				o := kubegen.Options{Sites: siteList, Groups: groupMap, Predicates: predMap, Dir: kube, Image: image}
				if o.Addresses, err = parseAddresses(addresses); err != nil {
					return err
				}
				dirs, err := kubegen.Write(o)
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), dirs)
				}
				for _, d := range dirs {
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (kubectl apply -k %s)\n", d, d)
				}
				return nil
			}
			if len(addresses) > 0 || image != "" {
				return errors.New("--address and --image: only with --kubernetes")
			}
			gen, err := siteconfig.Generate(siteconfig.GenerateOptions{Sites: siteList, Groups: groupMap, Predicates: predMap, Dir: dir})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), gen)
			}
			for _, g := range gen {
				fmt.Fprintf(cmd.OutOrStdout(), "%-16s config %s  client %s  http %s\n", g.Site, g.Config, g.Client, g.HTTP)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sites, "sites", "", "comma-separated site names, in configuration order (or --topology)")
	cmd.Flags().StringVar(&groups, "groups", "", "groups, e.g. us=us-east-1+us-west-2,eu=eu-west-1")
	cmd.Flags().StringVar(&topology, "topology", "", "take sites and groups from a WAN topology: a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology file")
	cmd.Flags().StringVar(&preds, "predicates", "", "named predicates, e.g. 'two=kth_max(2, persisted(sites))'; separate several with ;")
	cmd.Flags().StringVar(&dir, "dir", "", "folder for the config files and data folders of a loopback cluster")
	cmd.Flags().StringVar(&kube, "kubernetes", "", "folder for one Kustomize overlay per region, beside the base (deploy/k8s/overlays)")
	cmd.Flags().StringArrayVar(&addresses, "address", nil, "region=host: the host by which the other regions reach region (repeat per region; --kubernetes only)")
	cmd.Flags().StringVar(&image, "image", "", "image name[:tag] the overlays run instead of stabilizer:dev (--kubernetes only)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// genSites returns genconfig's sites and groups, from the flags or from a
// topology.
func genSites(sites, groups, topology string) ([]string, map[string][]string, error) {
	if topology != "" {
		if sites != "" || groups != "" {
			return nil, nil, errors.New("--topology and --sites/--groups: give one (the topology names the sites and groups)")
		}
		top, err := wan.OpenTopology(topology)
		if err != nil {
			return nil, nil, fmt.Errorf("--topology: %w", err)
		}
		return top.Sites, top.Groups, nil
	}
	var out []string
	for _, s := range strings.Split(sites, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	g, err := parseGroups(groups)
	return out, g, err
}

// parseAddresses reads --address region=host flags.
func parseAddresses(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		region, host, ok := strings.Cut(f, "=")
		if !ok || region == "" {
			return nil, fmt.Errorf("--address %q: not region=host", f)
		}
		if prev, dup := out[region]; dup && prev != host {
			return nil, fmt.Errorf("--address: region %s given twice (%s, %s)", region, prev, host)
		}
		out[region] = host
	}
	return out, nil
}

// parseGroups reads "us=a+b,eu=c" (members joined by + or |).
func parseGroups(s string) (map[string][]string, error) {
	out := map[string][]string{}
	if s == "" {
		return out, nil
	}
	for _, g := range strings.Split(s, ",") {
		name, members, ok := strings.Cut(g, "=")
		if !ok || name == "" || members == "" {
			return nil, fmt.Errorf("--groups: %q is not name=site[+site...]", g)
		}
		out[name] = append(out[name], strings.FieldsFunc(members, func(r rune) bool { return r == '+' || r == '|' })...)
	}
	return out, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

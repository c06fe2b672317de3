package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// result is one (predicate, writer region) row of a run.
type result struct {
	Predicate string          `json:"predicate"`
	Region    string          `json:"region"`
	Ops       int             `json:"ops"`
	Errors    int             `json:"errors"`
	P50ms     float64         `json:"p50_ms"`
	P90ms     float64         `json:"p90_ms"`
	P99ms     float64         `json:"p99_ms"`
	BoundMs   float64         `json:"bound_ms"`
	lat       []time.Duration `json:"-"`
}

// writers write the training platform's records from every site, each
// site cycling through the predicates, closed loop, until the duration
// ends or each (site, predicate) did perPred writes.
type writers struct {
	st         *state
	topo       *wan.Topology
	predicates []string
	perPred    int
	duration   time.Duration
	timeout    time.Duration
	progress   io.Writer
	// live, if set, replaces the progress bar: its line is printed every
	// second while the writes run.
	live func(ctx context.Context) string
}

func (w *writers) run(ctx context.Context) ([]*result, error) {
	schema := &frontier.Schema{Sites: w.topo.Sites, Groups: w.topo.Groups}
	rows := map[[2]string]*result{}
	var order []*result
	for _, p := range w.predicates {
		var cp *frontier.Predicate
		if !isLin(p) {
			src := p
			if b, ok := frontier.Builtins[p]; ok {
				src = b
			}
			var err error
			if cp, err = frontier.Compile(src, schema); err != nil {
				return nil, fmt.Errorf("predicate %q: %w (named predicates other than the built-ins must be given as source here)", p, err)
			}
		}
		for _, s := range w.st.Sites {
			var b time.Duration
			if cp != nil {
				b = workload.Bound(w.topo, cp, schema, s.Site)
			} else {
				b = linBound(w.topo, s.Site)
			}
			r := &result{Predicate: p, Region: s.Site, BoundMs: float64(b) / 1e6}
			rows[[2]string{p, s.Site}] = r
			order = append(order, r)
		}
	}
	total := w.perPred * len(w.predicates) * len(w.st.Sites)
	barOut := w.progress
	if w.live != nil {
		barOut = io.Discard
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(barOut), progressbar.OptionSetDescription("writes"),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	if w.live != nil {
		stopLive := make(chan struct{})
		liveDone := make(chan struct{})
		defer func() { close(stopLive); <-liveDone }()
		go func() {
			defer close(liveDone)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			start := time.Now()
			for {
				select {
				case <-stopLive:
					return
				case <-t.C:
					fmt.Fprintf(w.progress, "  %3.0fs  %s\n", time.Since(start).Seconds(), w.live(ctx))
				}
			}
		}()
	}
	if w.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.duration)
		defer cancel()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(w.st.Sites))
	for i, s := range w.st.Sites {
		c, err := kvclient.Dial(s.Client)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := workload.NewGen(s.Site, uint64(i+1))
			// A connection's first request pays for dialing and the
			// site's first use of the stream (about a second here); it is
			// made untimed, so that the table shows each predicate's
			// steady latency rather than the first row's p99 absorbing it.
			_, _ = c.Put(ctx, "warmup/"+s.Site, []byte("1"), "none", w.timeout)
			for n := 0; n < w.perPred*len(w.predicates); n++ {
				p := w.predicates[n%len(w.predicates)]
				rec := g.Next()
				start := time.Now()
				var err error
				switch p {
				case linPut:
					_, err = c.Put(ctx, "/lin/"+rec.Key, rec.Value, "", w.timeout)
				case linGet:
					_, err = c.Get(ctx, &kvpb.GetRequest{Key: "/lin/jobs/probe", TimeoutMs: w.timeout.Milliseconds()})
					if status.Code(err) == codes.NotFound {
						err = nil
					}
				default:
					_, err = c.Put(ctx, rec.Key, rec.Value, p, w.timeout)
				}
				d := time.Since(start)
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				r := rows[[2]string{p, s.Site}]
				if err != nil {
					r.Errors++
				} else {
					r.Ops++
					r.lat = append(r.lat, d)
				}
				mu.Unlock()
				_ = bar.Add(1)
				if err != nil && r.Errors > 3*w.perPred {
					errs <- fmt.Errorf("%s under %s: %v", s.Site, p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = bar.Finish()
	close(errs)
	for err := range errs {
		return nil, err
	}
	for _, r := range order {
		r.P50ms, r.P90ms, r.P99ms = ms(workload.Percentile(r.lat, .5)), ms(workload.Percentile(r.lat, .9)), ms(workload.Percentile(r.lat, .99))
	}
	return order, nil
}

// The pseudo-predicates lin and lin-get measure the linearizable mode:
// writes and reads of keys under /lin/, through the Raft group.
const (
	linPut = "lin"
	linGet = "lin-get"
)

func isLin(p string) bool { return p == linPut || p == linGet }

// linBound is the least latency of a linearizable operation from site w
// with the leader at the topology's first site (the preferred leader).
func linBound(topo *wan.Topology, w string) time.Duration {
	return workload.RaftBound(topo, topo.Sites[0], w)
}

// splitPredicates splits on ";" when there is one (sources contain
// commas), else on ",".
func splitPredicates(s string) []string {
	sep := ","
	if strings.Contains(s, ";") {
		sep = ";"
	}
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func printResults(w io.Writer, rows []*result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PREDICATE\tWRITER\tWRITES\tP50 ms\tP99 ms\tBOUND ms\tP50 - BOUND\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%+.1f\t\n", r.Predicate, r.Region, r.Ops, r.P50ms, r.P99ms, r.BoundMs, r.P50ms-r.BoundMs)
	}
	return tw.Flush()
}

func newRunCmd(dir *string, needDir func() error) *cobra.Command {
	var preds string
	var per int
	var duration, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run --dir DIR",
		Short: "Write a training platform's metadata from every site and report latency per predicate",
		Long: `Each site writes job records, checkpoint manifests and lineage edges (WORKLOAD.md, scaled
down) in a closed loop, cycling through the predicates, and the run reports for every
(predicate, writer region) the latency p50 and p99 beside the lower bound the RTT matrix
allows: the smallest round trip within which enough sites are reached to satisfy the predicate.`,
		Example: `  wanbed run --dir /tmp/bed --predicates none,one_remote,majority,all --writes 30`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needDir(); err != nil {
				return err
			}
			st, err := loadState(*dir)
			if err != nil {
				return err
			}
			topo, err := wan.OpenTopology(st.Topology)
			if err != nil {
				return err
			}
			if per < 1 {
				return errors.New("--writes must be at least 1")
			}
			w := &writers{st: st, topo: topo, predicates: splitPredicates(preds), perPred: per, duration: duration,
				timeout: timeout, progress: cmd.ErrOrStderr()}
			rows, err := w.run(cmd.Context())
			if err != nil {
				return err
			}
			if out, _ := cmd.Flags().GetString("output"); out == "json" {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			return printResults(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVar(&preds, "predicates", "none,one_remote,majority,all", "predicates, separated by , (or by ; when sources contain commas)")
	cmd.Flags().IntVar(&per, "writes", 30, "writes per site and predicate")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: when all writes are done)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "per-write wait timeout")
	return cmd
}

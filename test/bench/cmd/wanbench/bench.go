package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// Systems, as results.json names them.
const (
	// sysOurs is our KV through kvclient.Client as shipped: each client's writes
	// pipelined on one Writes stream.
	sysOurs = "stabilizer"
	// sysOursUnary is our KV with one unary request per write
	// (kvclient.Client.Unary), as the peers' clients send theirs.
	sysOursUnary = "stabilizer-unary"
	sysLin       = "stabilizer-lin"
	sysEtcd      = "etcd"
	sysNATS      = "nats-jetstream"
)

// Phases of a row.
const (
	phaseWAN  = "wan"
	phaseTput = "throughput"
)

// benchRow is one row of results.json: a (system, predicate, region) of the
// WAN phase, or a (system, predicate, in flight) of the throughput phase.
type benchRow struct {
	Phase     string  `json:"phase"`
	System    string  `json:"system"`
	Predicate string  `json:"predicate"`
	Region    string  `json:"region"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	BoundMs   float64 `json:"bound_ms"`
	OpsPerS   float64 `json:"ops_per_s,omitempty"`
	InFlight  int     `json:"in_flight,omitempty"`
	// Conns is how many client connections per site the throughput row
	// used.
	Conns int `json:"conns,omitempty"`
	// Source is the predicate's expression when it is not a built-in name.
	Source string `json:"predicate_source,omitempty"`
	// Skipped says why the row was not measured.
	Skipped string `json:"skipped,omitempty"`
	// FirstError is the first error a write of the row returned.
	FirstError string `json:"first_error,omitempty"`

	lat []time.Duration
}

func (r *benchRow) finish() {
	r.P50ms, r.P90ms, r.P99ms = ms(workload.Percentile(r.lat, .5)), ms(workload.Percentile(r.lat, .9)), ms(workload.Percentile(r.lat, .99))
}

type benchOptions struct {
	topology string
	out      string
	// writes per (system, predicate, region) in the WAN phase, after warmup.
	writes, warmup int
	// tputDuration is each throughput run's measured window (after a
	// warm-up of a fifth of it).
	tputDuration time.Duration
	inflight     []int
	// conns lists how many connections the throughput clients of every
	// system open to each site or member: every system runs at each, and
	// the comparisons take each system's best.
	conns      []int
	valueBytes int
	skip       map[string]bool // "wan", "etcd", "lin", "nats", "throughput"
	keepWork   bool
	progress   io.Writer
}

// benchResults is everything a run measured, and how.
type benchResults struct {
	Topology string      `json:"topology"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished"`
	Host     string      `json:"host"`
	Rows     []*benchRow `json:"rows"`
	// Notes say how each system was set up, what was skipped and why.
	Notes []string `json:"notes"`
	// Leader is the site that led the Raft groups in the WAN phase.
	Leader string `json:"leader"`
	// RTT is the topology's matrix in ms, for the report.
	Sites  []string                      `json:"sites"`
	RTTms  map[string]map[string]float64 `json:"rtt_ms"`
	Groups map[string][]string           `json:"groups"`
}

func (r *benchResults) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *benchResults) skipRow(phase, system, predicate, region, why string) {
	r.Rows = append(r.Rows, &benchRow{Phase: phase, System: system, Predicate: predicate, Region: region, Skipped: why})
}

func runBench(ctx context.Context, o benchOptions) error {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	work := filepath.Join(o.out, "work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if !o.keepWork {
		defer os.RemoveAll(work)
	}
	res := &benchResults{Topology: topo.Name, Started: time.Now(), Sites: topo.Sites, Groups: topo.Groups,
		RTTms: map[string]map[string]float64{}, Leader: topo.Sites[0]}
	res.Host = hostDescription()
	for _, a := range topo.Sites {
		res.RTTms[a] = map[string]float64{}
		for _, b := range topo.Sites {
			if a != b {
				d, _ := topo.RTT(a, b)
				res.RTTms[a][b] = ms(d)
			}
		}
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "\n[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	save := func() error {
		res.Finished = time.Now()
		return writeBenchOutputs(o.out, res)
	}
	if !o.skip["wan"] {
		step("WAN %s: our KV from every region, %d writes per predicate and region", topo.Name, o.writes)
		if err := benchOursWAN(ctx, o, topo, filepath.Join(work, "stabilizer-wan"), res); err != nil {
			return fmt.Errorf("our KV on the WAN: %w", err)
		}
		if err := save(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if o.skip["etcd"] {
			res.skipRow(phaseWAN, sysEtcd, "linearizable", "", "skipped: --skip etcd")
		} else {
			step("WAN %s: etcd, one member per region, each in its own network namespace", topo.Name)
			if err := benchEtcdWAN(ctx, o, topo, filepath.Join(work, "etcd-wan"), res); err != nil {
				return fmt.Errorf("etcd on the WAN: %w", err)
			}
		}
		if err := save(); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !o.skip["throughput"] {
		step("loopback throughput, 3 sites, every write fsynced at a majority before its ack")
		if err := benchThroughput(ctx, o, filepath.Join(work, "throughput"), res, step); err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if err := save(); err != nil {
		return err
	}
	step("done: %s, %s", filepath.Join(o.out, "report.md"), filepath.Join(o.out, "results.json"))
	return nil
}

// hostDescription names the machine's CPU count and model, for the report.
func hostDescription() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	h, _ := os.Hostname()
	return strings.TrimSpace(fmt.Sprintf("%s, %d CPUs %s", h, runtime.NumCPU(), model))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

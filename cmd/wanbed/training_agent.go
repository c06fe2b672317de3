package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
)

// agentOptions configure one process of the training scenario: a region's
// scheduler, its trainer, or a dashboard.
type agentOptions struct {
	role, region, client, events string
	job, folder, stateFile       string
	topic, predicate, share      string
	shards                       int
	shardBytes, writeRate        int64
	interval, ttl                time.Duration
}

// The scenario's keys: the job record is linearizable (owned under a
// lease); manifests and lineage edges live in the eventually consistent KV
// and are written under the predicate.
func jobKey(job string) string                { return "/lin/jobs/" + job }
func ckptDir(step int) string                 { return fmt.Sprintf("step-%06d", step) }
func manifestKey(job string, step int) string { return "ckpt/" + job + "/" + ckptDir(step) }
func lineageKey(job string, step int, edge string) string {
	return "lineage/" + job + "/" + ckptDir(step) + "/" + edge
}

// jobRecord is the job's record (WORKLOAD.md): one owner at a time.
type jobRecord struct {
	Job        string `json:"job"`
	State      string `json:"state"`
	Region     string `json:"region"`
	Holder     string `json:"holder"`
	Token      uint64 `json:"token"`
	Checkpoint string `json:"checkpoint,omitempty"`
	GPUs       int    `json:"gpus"`
	GPUType    string `json:"gpu_type"`
}

type shardRef struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// manifest is a checkpoint's manifest: what a trainer needs to resume.
type manifest struct {
	Job        string     `json:"job"`
	Step       int        `json:"step"`
	Wall       time.Time  `json:"wall"`
	Shards     []shardRef `json:"shards"`
	Parent     string     `json:"parent,omitempty"`
	DataLoader struct {
		Epoch  int `json:"epoch"`
		Sample int `json:"sample"`
	} `json:"data_loader"`
	RNG string `json:"rng"`
}

// jobEvent is what the platform publishes: which record it announces.
type jobEvent struct {
	Type   string `json:"type"`
	Job    string `json:"job"`
	Step   int    `json:"step,omitempty"`
	Record string `json:"record"`
	Region string `json:"region"`
	Token  uint64 `json:"token,omitempty"`
	ID     string `json:"id"`
}

func newAgentCmd() *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:    "agent ROLE",
		Hidden: true,
		Short:  "One process of the training scenario: scheduler, trainer or dashboard",
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.role = args[0]
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runAgent(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.region, "region", "", "the region (site) this process runs in")
	f.StringVar(&o.client, "client", "", "the region's site client address")
	f.StringVar(&o.events, "events", "", "event file to append to")
	f.StringVar(&o.job, "job", "job-7", "job id")
	f.StringVar(&o.folder, "folder", "", "the region's stabsync folder of the checkpoint share")
	f.StringVar(&o.stateFile, "state", "", "scheduler: file that keeps the lease token across restarts")
	f.StringVar(&o.topic, "topic", "training.events", "job events topic")
	f.StringVar(&o.predicate, "predicate", "two_continents", "what manifests and lineage wait for")
	f.StringVar(&o.share, "share", "ckpt", "checkpoint share")
	f.IntVar(&o.shards, "shards", 4, "trainer: shards per checkpoint")
	f.Int64Var(&o.shardBytes, "shard-bytes", 4<<20, "trainer: bytes per shard")
	f.Int64Var(&o.writeRate, "write-rate", 32<<20, "trainer: bytes/s at which shards are written")
	f.DurationVar(&o.interval, "interval", time.Second, "trainer: training time between checkpoints")
	f.DurationVar(&o.ttl, "ttl", 4*time.Second, "scheduler: lease TTL")
	return cmd
}

func runAgent(ctx context.Context, o agentOptions) error {
	if o.region == "" || o.client == "" || o.events == "" {
		return errors.New("agent: --region, --client and --events are required")
	}
	log, err := openEventLog(o.events)
	if err != nil {
		return err
	}
	defer log.Close()
	kv, err := kvclient.Dial(o.client)
	if err != nil {
		return err
	}
	defer kv.Close()
	ps, err := pubsubclient.Dial([]string{o.client})
	if err != nil {
		return err
	}
	defer ps.Close()
	a := &agent{o: o, log: log, kv: kv, ps: ps}
	switch o.role {
	case "scheduler":
		err = a.schedule(ctx)
	case "trainer":
		err = a.train(ctx)
	case "dashboard":
		err = a.watch(ctx)
	default:
		return fmt.Errorf("agent: unknown role %q (known: scheduler, trainer, dashboard)", o.role)
	}
	if err != nil && ctx.Err() == nil {
		log.emit(agentEvent{Ev: "failed", Err: err.Error()})
		return err
	}
	return nil
}

type agent struct {
	o   agentOptions
	log *eventLog
	kv  *kvclient.Client
	ps  *pubsubclient.Client
}

func (a *agent) emit(e agentEvent) {
	e.Region = a.o.region
	a.log.emit(e)
}

func errText(err error) string { return status.Convert(err).Message() }

// readJob reads the job record linearizably; ok is false when there is none.
func (a *agent) readJob(ctx context.Context) (jobRecord, bool, error) {
	res, err := a.kv.Get(ctx, &kvpb.GetRequest{Key: jobKey(a.o.job), TimeoutMs: 10_000})
	if status.Code(err) == codes.NotFound {
		return jobRecord{}, false, nil
	}
	if err != nil {
		return jobRecord{}, false, err
	}
	if res.Version == nil || res.Version.Deleted || len(res.Version.Value) == 0 {
		return jobRecord{}, false, nil
	}
	var r jobRecord
	return r, true, json.Unmarshal(res.Version.Value, &r)
}

// writeJob writes the job record fenced by the lease: refused once the
// lease moved on, whatever this process believes.
func (a *agent) writeJob(ctx context.Context, r jobRecord) error {
	b, _ := json.Marshal(r)
	_, err := a.kv.KV.CompareAndSwap(ctx, &kvpb.CASRequest{Key: jobKey(a.o.job), Value: b,
		LeaseJob: a.o.job, LeaseToken: r.Token, TimeoutMs: 10_000})
	return err
}

func (a *agent) publish(ctx context.Context, ev jobEvent) error {
	ev.Job, ev.Region = a.o.job, a.o.region
	b, _ := json.Marshal(ev)
	ack, err := a.ps.Publish(ctx, a.o.topic, b, pubsubclient.MsgID(ev.ID))
	if err != nil {
		return fmt.Errorf("publish %s: %w", ev.ID, err)
	}
	a.emit(agentEvent{Ev: "event.published", Step: ev.Step, ID: ev.ID, Seq: ack.Seq, Key: ev.Record})
	return nil
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// shardData is a shard's content. Shard 0 (the embedding table, frozen) is
// the same in every checkpoint, so consecutive checkpoints share its
// chunks; the others change every step.
func shardData(step, shard int, n int64) []byte {
	seed := uint64(step)
	if shard == 0 {
		seed = 0
	}
	r := rand.New(rand.NewPCG(seed, uint64(shard)))
	b := make([]byte, n)
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func readToken(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	t, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return t
}

func writeToken(path string, token uint64) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(token, 10)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeSlowly writes b to path at rate bytes/s and fsyncs it: a trainer
// streams a shard out of GPU memory, it does not appear at once.
func writeSlowly(ctx context.Context, path string, b []byte, rate int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const piece = 256 << 10
	start := time.Now()
	for off := 0; off < len(b); off += piece {
		end := min(off+piece, len(b))
		if _, err := f.Write(b[off:end]); err != nil {
			return err
		}
		if rate > 0 {
			due := start.Add(time.Duration(float64(end) / float64(rate) * float64(time.Second)))
			if err := pause(ctx, time.Until(due)); err != nil {
				return err
			}
		}
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// shardHeld checks that folder holds shard s: its size, and its SHA-256
// too when hashes is set (a stat is enough to see it arrived).
func shardHeld(folder string, s shardRef, hashes bool) error {
	p := filepath.Join(folder, filepath.FromSlash(s.Path))
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.Size() != s.Size {
		return fmt.Errorf("%s: %d bytes, the manifest says %d", s.Path, fi.Size(), s.Size)
	}
	if !hashes {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if h := sha256Hex(b); h != s.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s", s.Path, h, s.SHA256)
	}
	return nil
}

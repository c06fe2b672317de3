package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/wan"
)

// trainingSettle is how long a checkpoint file must stand still before the
// trainer's stabsync hashes and publishes it.
const trainingSettle = 100 * time.Millisecond

// trainingOptions shape the training scenario.
type trainingOptions struct {
	checkpoints           int // committed before the region is lost
	shards                int
	shardBytes, writeRate int64
	interval, ttl         time.Duration
	bandwidth             string // every link's, "" keeps the topology's
	predicate             string // a named predicate every site knows
	topic, share, job     string
}

// training runs the scenario against a running testbed: the job in the
// first region (us), a standby scheduler in the second (eu), a dashboard
// in the third (ap).
type training struct {
	o          trainingOptions
	w          io.Writer
	dir        string // DIR/training
	bed        string // the testbed's DIR
	st         *state
	topo       *wan.Topology
	us, eu, ap string
	self, sync string // wanbed and stabsync binaries
	bw         wan.Bandwidth
	start      time.Time
	marks      []mark
	procs      map[string]*proc
	clients    map[string]*kvclient.Client
	resumable  map[int]time.Time // step -> when the checkpoint was resumable at eu
	lossAt     time.Time
	electedAt  time.Time // when eu first saw a Raft leader other than us after the loss
	leaderPoll time.Time
	checks     []check
}

type proc struct {
	name, region, events, log string
	pid                       int
}

// mark is one line of the timeline.
type mark struct {
	at    time.Time
	where string
	what  string
}

type check struct {
	name string
	ok   bool
	note string
}

func (t *training) mark(where, format string, args ...any) {
	t.marks = append(t.marks, mark{time.Now(), where, fmt.Sprintf(format, args...)})
}

func (t *training) check(name string, ok bool, format string, args ...any) {
	t.checks = append(t.checks, check{name, ok, fmt.Sprintf(format, args...)})
}

func newTraining(w io.Writer, bed string, st *state, topo *wan.Topology, o trainingOptions) (*training, error) {
	t := &training{o: o, w: w, bed: bed, dir: filepath.Join(bed, "training"), st: st, topo: topo,
		us: topo.Groups["us"][0], eu: topo.Groups["eu"][0], ap: topo.Groups["ap"][0],
		procs: map[string]*proc{}, clients: map[string]*kvclient.Client{}, resumable: map[int]time.Time{}}
	var err error
	if t.self, err = os.Executable(); err != nil {
		return nil, err
	}
	t.sync = filepath.Join(filepath.Dir(t.self), "stabsync")
	if _, err := os.Stat(t.sync); err != nil {
		if t.sync, err = exec.LookPath("stabsync"); err != nil {
			return nil, errors.New("stabsync not found beside wanbed or on PATH (build it: go build -o bin/ ./cmd/...)")
		}
	}
	if err := os.RemoveAll(t.dir); err != nil {
		return nil, err
	}
	for _, r := range []string{t.us, t.eu} {
		if err := os.MkdirAll(t.folder(r), 0o755); err != nil {
			return nil, err
		}
	}
	for _, s := range topo.Sites {
		c, err := kvclient.Dial(siteOf(st, s).Client)
		if err != nil {
			return nil, err
		}
		t.clients[s] = c
	}
	if o.bandwidth != "" {
		if t.bw, err = wan.ParseBandwidth(o.bandwidth); err != nil {
			return nil, fmt.Errorf("--bw: %w", err)
		}
	} else if lc, err := topo.LinkConfig(t.us, t.eu); err == nil {
		t.bw = lc.Bandwidth
	}
	return t, nil
}

func (t *training) close() {
	for _, c := range t.clients {
		_ = c.Close()
	}
}

func (t *training) folder(region string) string { return filepath.Join(t.dir, region, "ckpt") }

// runTraining runs the whole scenario and prints its timeline, figures and
// checks; it fails if a check failed.
func runTraining(ctx context.Context, w io.Writer, bed string, st *state, topo *wan.Topology, o trainingOptions) error {
	t, err := newTraining(w, bed, st, topo, o)
	if err != nil {
		return err
	}
	defer t.close()
	defer t.stopAgents()
	t.start = time.Now()
	steps := []func(context.Context) error{t.setup, t.startJob, t.runUntilLoss, t.loseRegion, t.waitResumed, t.comeBack, t.verifyAfter}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			t.printTimeline()
			return err
		}
	}
	t.stopAgents()
	t.printTimeline()
	t.printFigures()
	return t.printChecks()
}

func (t *training) setup(ctx context.Context) error {
	section(t.w, "The training job: a scheduler and a trainer in "+t.us+", a standby scheduler in "+t.eu+", a dashboard in "+t.ap)
	if t.o.bandwidth != "" {
		for _, a := range t.topo.Sites {
			for _, b := range t.topo.Sites {
				if a != b {
					bw := t.o.bandwidth
					if _, err := postLink(t.st.WAN.Control, a, b, linkChange{Bandwidth: &bw}); err != nil {
						return err
					}
				}
			}
		}
	}
	fmt.Fprintf(t.w, "checkpoints: %d shards of %s (shard 0 the same in every checkpoint), written at %s/s, every %v;\n",
		t.o.shards, mib(t.o.shardBytes), mib(t.o.writeRate), t.o.interval)
	fmt.Fprintf(t.w, "manifests, lineage and the share's visibility wait for %s; links at %s; lease TTL %v\n", t.o.predicate, t.bwText(), t.o.ttl)
	out, err := exec.CommandContext(ctx, t.sync, "init", t.folder(t.us), "--share", t.o.share, "--site", siteOf(t.st, t.us).Client,
		"--create", "--visibility", t.o.predicate, "--marker", ".metadata", "--commit-dirs", "step-*", "--settle", trainingSettle.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("stabsync init at %s: %v\n%s", t.us, err, out)
	}
	if err := t.joinShare(ctx); err != nil {
		return err
	}
	ps, err := pubsubclient.Dial([]string{siteOf(t.st, t.us).Client})
	if err != nil {
		return err
	}
	defer ps.Close()
	if _, err := ps.CreateTopic(ctx, pubsubclient.Topic{Name: t.o.topic, PublishAck: t.o.predicate, Delivery: t.o.predicate}); err != nil {
		return fmt.Errorf("create topic %s: %w", t.o.topic, err)
	}
	ap, err := pubsubclient.Dial([]string{siteOf(t.st, t.ap).Client})
	if err != nil {
		return err
	}
	defer ap.Close()
	if err := waitTopic(ctx, ap, t.o.topic); err != nil {
		return err
	}
	for _, r := range []string{t.us, t.eu} {
		if err := t.spawn(r, "stabsync", t.sync, "run", t.folder(r), "--verbose"); err != nil {
			return err
		}
	}
	t.mark("", "share %s (marker .metadata, visibility %s) synced at %s and %s; topic %s (delivery %s)", t.o.share, t.o.predicate, t.us, t.eu, t.o.topic, t.o.predicate)
	return nil
}

// joinShare makes eu's folder a synced folder of the share once the
// share's definition reached eu.
func (t *training) joinShare(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, t.sync, "init", t.folder(t.eu), "--share", t.o.share, "--site", siteOf(t.st, t.eu).Client).CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stabsync init at %s: %v\n%s", t.eu, err, out)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (t *training) bwText() string {
	if t.bw == 0 {
		return "no bandwidth limit"
	}
	return fmt.Sprintf("%.0f MB/s", float64(t.bw)/1e6)
}

// spawn starts a process of region r, detached, and records it in the
// testbed's state so that `wanbed down` stops it too.
func (t *training) spawn(r, role, bin string, args ...string) error {
	name := r + "-" + role
	for i := 2; t.procs[name] != nil; i++ {
		name = fmt.Sprintf("%s-%s-%d", r, role, i)
	}
	p := &proc{name: name, region: r, log: filepath.Join(t.dir, name+".log"), events: filepath.Join(t.dir, name+".jsonl")}
	if bin == t.self {
		args = append(args, "--events", p.events)
	}
	var err error
	if p.pid, err = spawn(bin, p.log, args...); err != nil {
		return err
	}
	t.procs[name] = p
	t.st.Agents = append(t.st.Agents, agentState{Name: name, PID: p.pid, Log: p.log})
	return saveState(t.bed, t.st)
}

func (t *training) agentArgs(r, role string, extra ...string) []string {
	o := t.o
	args := []string{"agent", role, "--region", r, "--client", siteOf(t.st, r).Client, "--job", o.job,
		"--topic", o.topic, "--predicate", o.predicate, "--share", o.share, "--ttl", o.ttl.String()}
	return append(args, extra...)
}

func (t *training) startScheduler(r string) error {
	return t.spawn(r, "scheduler", t.self, t.agentArgs(r, "scheduler",
		"--folder", t.folder(r), "--state", filepath.Join(t.dir, r+"-scheduler.token"))...)
}

func (t *training) startJob(ctx context.Context) error {
	if err := t.startScheduler(t.us); err != nil {
		return err
	}
	e, err := t.await(ctx, t.us+"-scheduler", "job.started", nil, 30*time.Second)
	if err != nil {
		return err
	}
	t.mark(t.us, "scheduler holds the lease of %s (token %d) and records the job", t.o.job, e.Token)
	if err := t.startScheduler(t.eu); err != nil {
		return err
	}
	if err := t.spawn(t.ap, "dashboard", t.self, t.agentArgs(t.ap, "dashboard")...); err != nil {
		return err
	}
	if _, err := t.await(ctx, t.ap+"-dashboard", "dashboard.subscribed", nil, 30*time.Second); err != nil {
		return err
	}
	return t.spawn(t.us, "trainer", t.self, t.agentArgs(t.us, "trainer", "--folder", t.folder(t.us),
		"--shards", fmt.Sprint(t.o.shards), "--shard-bytes", fmt.Sprint(t.o.shardBytes),
		"--write-rate", fmt.Sprint(t.o.writeRate), "--interval", t.o.interval.String())...)
}

// events returns a process's events so far.
func (t *training) events(name string) []agentEvent {
	p := t.procs[name]
	if p == nil {
		return nil
	}
	evs, _ := readEvents(p.events)
	return evs
}

// await polls a process's events until ev appears (and match accepts it),
// the process fails, or the timeout passes. Every poll also checks
// whether a checkpoint became resumable at eu.
func (t *training) await(ctx context.Context, name, ev string, match func(agentEvent) bool, timeout time.Duration) (agentEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		evs := t.events(name)
		if e, ok := find(evs, ev, match); ok {
			return e, nil
		}
		if e, ok := find(evs, "failed", nil); ok {
			return agentEvent{}, fmt.Errorf("%s failed: %s (log: %s)", name, e.Err, t.procs[name].log)
		}
		if time.Now().After(deadline) {
			return agentEvent{}, fmt.Errorf("%s: no %s within %v (events: %s, log: %s)", name, ev, timeout, t.procs[name].events, t.procs[name].log)
		}
		t.pollResumable(ctx)
		t.pollLeader(ctx)
		if err := pause(ctx, 10*time.Millisecond); err != nil {
			return agentEvent{}, err
		}
	}
}

// pollResumable notes when each committed checkpoint became resumable at
// eu: its manifest stable there and every shard in eu's folder with its
// manifest's size (the hashes are checked by the scheduler that resumes).
func (t *training) pollResumable(ctx context.Context) {
	for _, e := range t.events(t.us + "-trainer") {
		if e.Ev != "ckpt.committed" || !t.resumable[e.Step].IsZero() {
			continue
		}
		m, ok := t.stableManifest(ctx, t.eu, e.Step)
		if !ok || !t.inFolder(t.eu, m, false) {
			return
		}
		t.resumable[e.Step] = time.Now()
	}
}

// pollLeader notes, after the loss, when eu first names a Raft leader of
// the linearizable group other than us: the election the lease waits for.
func (t *training) pollLeader(ctx context.Context) {
	if t.lossAt.IsZero() || !t.electedAt.IsZero() || time.Since(t.leaderPoll) < 50*time.Millisecond {
		return
	}
	t.leaderPoll = time.Now()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := t.clients[t.eu].Admin.Status(ctx, &kvpb.StatusRequest{})
	if err != nil || res.Lin == nil || res.Lin.Leader == "" || res.Lin.Leader == t.us {
		return
	}
	t.electedAt = time.Now()
	t.mark(t.eu, "raft: %s leads the linearizable group (term %d); the lease it inherits runs a full TTL from now", res.Lin.Leader, res.Lin.Term)
}

func (t *training) stableManifest(ctx context.Context, site string, step int) (manifest, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	g, err := t.clients[site].Get(ctx, &kvpb.GetRequest{Key: manifestKey(t.o.job, step), Stable: t.o.predicate})
	if err != nil || g.Version == nil || g.Version.Deleted {
		return manifest{}, false
	}
	var m manifest
	return m, json.Unmarshal(g.Version.Value, &m) == nil && m.Step == step
}

// inFolder reports whether region's folder holds every shard of m with its
// size, and with its hash too when hashes is set.
func (t *training) inFolder(region string, m manifest, hashes bool) bool {
	for _, s := range m.Shards {
		if shardHeld(t.folder(region), s, hashes) != nil {
			return false
		}
	}
	return true
}

// runUntilLoss lets the job checkpoint, then waits until the trainer is
// half-way through writing the next checkpoint's shards.
func (t *training) runUntilLoss(ctx context.Context) error {
	tr := t.us + "-trainer"
	k := t.o.checkpoints
	if _, err := t.await(ctx, tr, "event.published", func(e agentEvent) bool { return e.Step == k }, 2*time.Minute); err != nil {
		return err
	}
	half := max(t.o.shards/2-1, 0)
	_, err := t.await(ctx, tr, "shard.written", func(e agentEvent) bool { return e.Step == k+1 && e.Shard == half }, time.Minute)
	return err
}

// loseRegion kills every process of us with SIGKILL and cuts its links.
func (t *training) loseRegion(ctx context.Context) error {
	if _, ok := find(t.events(t.us+"-trainer"), "ckpt.committed", func(e agentEvent) bool { return e.Step == t.o.checkpoints+1 }); ok {
		return fmt.Errorf("the trainer committed checkpoint %d before the region could be lost mid-write: lower --write-rate", t.o.checkpoints+1)
	}
	pids := []int{siteOf(t.st, t.us).PID}
	for _, p := range t.procs {
		if p.region == t.us {
			pids = append(pids, p.pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.lossAt = time.Now()
	if err := isolate(t.st.WAN.Control, t.topo, t.us, true); err != nil {
		return err
	}
	for _, p := range t.procs {
		if p.region == t.us {
			p.pid = 0
		}
	}
	t.mark(t.us, "REGION LOST: %d processes killed with SIGKILL (site, scheduler, trainer, stabsync), links cut", len(pids))
	return nil
}

func (t *training) waitResumed(ctx context.Context) error {
	name := t.eu + "-scheduler"
	timeout := 4*t.o.ttl + 60*time.Second
	if _, err := t.await(ctx, name, "job.resumed", nil, timeout); err != nil {
		return err
	}
	// Every event published before the loss, and the migration, reaches
	// the dashboard.
	want := t.published()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := t.seen()
		missing := 0
		for id := range want {
			if _, ok := seen[id]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return nil
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// published is every event an agent reported published (acknowledged).
func (t *training) published() map[string]agentEvent {
	out := map[string]agentEvent{}
	for name := range t.procs {
		for _, e := range t.events(name) {
			if e.Ev == "event.published" {
				out[e.ID] = e
			}
		}
	}
	return out
}

func (t *training) seen() map[string]agentEvent {
	out := map[string]agentEvent{}
	for _, e := range t.events(t.ap + "-dashboard") {
		if e.Ev == "event.seen" {
			if _, dup := out[e.ID]; !dup {
				out[e.ID] = e
			}
		}
	}
	return out
}

// comeBack restores us: links, then its site from its data folder, then
// its old scheduler with the token it kept.
func (t *training) comeBack(ctx context.Context) error {
	if err := isolate(t.st.WAN.Control, t.topo, t.us, false); err != nil {
		return err
	}
	if err := restartSite(t.bed, t.st, t.us); err != nil {
		return err
	}
	t.mark(t.us, "back: links restored, site restarted from its data folder")
	if err := t.startScheduler(t.us); err != nil {
		return err
	}
	name := t.us + "-scheduler-2"
	if _, err := t.await(ctx, name, "lease.waiting", nil, 60*time.Second); err != nil {
		return err
	}
	return t.waitCaughtUp(ctx)
}

// waitCaughtUp waits until us and eu hold the same of every stream (what
// eu wrote while us was gone, and what us wrote before it died) and us
// reads the job record eu wrote.
func (t *training) waitCaughtUp(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag, n, err := t.streamsBehind(ctx)
		if err == nil && lag == "" {
			rec, err := t.jobAt(ctx, t.us)
			if err == nil && rec.Region == t.eu {
				t.mark(t.us, "caught up: holds all %d streams as far as %s does, reads the job record owned by %s", n, t.eu, rec.Region)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not catch up with %s within 60s: %s %v", t.us, t.eu, lag, err)
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// streamsBehind names a stream one of us and eu holds less of than the
// other, "" when none; n is how many streams they hold.
func (t *training) streamsBehind(ctx context.Context) (lag string, n int, err error) {
	a, err := t.heads(ctx, t.us)
	if err != nil {
		return "", 0, err
	}
	b, err := t.heads(ctx, t.eu)
	if err != nil {
		return "", 0, err
	}
	for k, h := range b {
		if a[k] < h {
			return fmt.Sprintf("%s at %d of %d", k, a[k], h), 0, nil
		}
	}
	for k, h := range a {
		if b[k] < h {
			return fmt.Sprintf("%s at %s: %d of %d", k, t.eu, b[k], h), 0, nil
		}
	}
	return "", len(b), nil
}

func (t *training) heads(ctx context.Context, site string) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := t.clients[site].Admin.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, s := range res.Streams {
		out[s.Origin+"/"+s.Stream] = s.Head
	}
	return out, nil
}

func (t *training) jobAt(ctx context.Context, site string) (jobRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := t.clients[site].Get(ctx, &kvpb.GetRequest{Key: jobKey(t.o.job)})
	if err != nil {
		return jobRecord{}, err
	}
	if g.Version == nil {
		return jobRecord{}, errors.New("no job record")
	}
	var r jobRecord
	return r, json.Unmarshal(g.Version.Value, &r)
}

// verifyAfter checks what must hold once the region is back.
func (t *training) verifyAfter(ctx context.Context) error {
	t.checkStableKept(ctx)
	t.checkEvents()
	t.checkFence(ctx)
	return t.checkHalfWritten(ctx)
}

// checkStableKept: every checkpoint whose manifest was acknowledged under
// the predicate is stable at both surviving regions, its shards are whole
// in eu's folder, and the job resumed from the newest of them.
func (t *training) checkStableKept(ctx context.Context) {
	var acked []int
	for _, e := range t.events(t.us + "-trainer") {
		if e.Ev == "manifest.acked" && e.at().Before(t.lossAt) {
			acked = append(acked, e.Step)
		}
	}
	var missing []string
	for _, step := range acked {
		for _, site := range []string{t.eu, t.ap} {
			m, ok := t.stableManifest(ctx, site, step)
			switch {
			case !ok:
				missing = append(missing, fmt.Sprintf("%s manifest at %s", ckptDir(step), site))
			case site == t.eu && !t.inFolder(t.eu, m, true):
				missing = append(missing, fmt.Sprintf("%s shards in %s's folder", ckptDir(step), t.eu))
			}
		}
	}
	t.check("nothing reported stable is missing", len(acked) > 0 && len(missing) == 0,
		"%d checkpoints acknowledged under %s before the loss; missing: %s", len(acked), t.o.predicate, orNone(missing))
	r, _ := find(t.events(t.eu+"-scheduler"), "job.resumed", nil)
	newest := 0
	if len(acked) > 0 {
		newest = acked[len(acked)-1]
	}
	t.check("resumed from the newest stable checkpoint", r.Step == newest && newest > 0,
		"resumed from %s; newest acknowledged %s", ckptDir(r.Step), ckptDir(newest))
}

// checkEvents: the dashboard saw every event acknowledged to a publisher,
// none before the record it announces was stable at its site.
func (t *training) checkEvents() {
	want, seen := t.published(), t.seen()
	var missing, early []string
	for id := range want {
		if _, ok := seen[id]; !ok {
			missing = append(missing, id)
		}
	}
	for id, e := range seen {
		if e.Early {
			early = append(early, id+" ("+e.Err+")")
		}
	}
	t.check("the dashboard saw every event", len(want) > 0 && len(missing) == 0, "%d published and acknowledged, %d seen at %s; missing: %s", len(want), len(seen), t.ap, orNone(missing))
	t.check("no event delivered before its record was stable", len(early) == 0, "early: %s", orNone(early))
}

// checkFence: the old scheduler's write with its stale token was refused
// and the job record still names eu's scheduler.
func (t *training) checkFence(ctx context.Context) {
	e, refused := find(t.events(t.us+"-scheduler-2"), "stale.refused", nil)
	_, accepted := find(t.events(t.us+"-scheduler-2"), "stale.accepted", nil)
	rec, err := t.jobAt(ctx, t.eu)
	t.check("the stale token's write was refused", refused && !accepted && err == nil && rec.Region == t.eu,
		"token %d: %s; job record owner %s, token %d", e.Token, e.Err, rec.Region, rec.Token)
}

// checkHalfWritten: the checkpoint being written when the region was lost
// has no version and no manifest at any site, and no folder shows it.
func (t *training) checkHalfWritten(ctx context.Context) error {
	half := ckptDir(t.o.checkpoints + 1)
	var seen []string
	for _, s := range t.topo.Sites {
		n, err := t.shareVersions(ctx, s, half)
		if err != nil {
			return err
		}
		if n > 0 {
			seen = append(seen, fmt.Sprintf("%d versions at %s", n, s))
		}
		g, err := t.clients[s].Get(ctx, &kvpb.GetRequest{Key: manifestKey(t.o.job, t.o.checkpoints+1), TimeoutMs: 5000})
		if err == nil && g.Version != nil && !g.Version.Deleted {
			seen = append(seen, "a manifest at "+s)
		}
	}
	if _, err := os.Stat(filepath.Join(t.folder(t.eu), half)); err == nil {
		seen = append(seen, "a folder at "+t.eu)
	}
	written := 0
	for _, e := range t.events(t.us + "-trainer") {
		if e.Ev == "shard.written" && e.Step == t.o.checkpoints+1 {
			written++
		}
	}
	t.check("the half-written checkpoint never became visible", len(seen) == 0 && written > 0,
		"%s: %d of %d shards written in %s when it was lost; seen: %s", half, written, t.o.shards, t.us, orNone(seen))
	return nil
}

func (t *training) shareVersions(ctx context.Context, site, dir string) (int, error) {
	conn, err := grpc.NewClient(siteOf(t.st, site).Client, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := filesharepb.NewFileShareClient(conn).List(ctx, &filesharepb.ListRequest{Share: t.o.share})
	if err != nil {
		return 0, fmt.Errorf("list share %s at %s: %w", t.o.share, site, err)
	}
	n := 0
	for _, v := range res.Versions {
		if strings.HasPrefix(v.Path, dir+"/") {
			n++
		}
	}
	return n, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// stopAgents stops the scenario's processes that still run (SIGTERM, then
// SIGKILL).
func (t *training) stopAgents() {
	var pids []int
	for _, p := range t.procs {
		if p.pid > 0 {
			pids = append(pids, p.pid)
			p.pid = 0
		}
	}
	stopPIDs(pids, io.Discard)
}

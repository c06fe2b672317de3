package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
)

// schedule is a region's scheduler: it takes the job's lease (waiting while
// another region holds it), runs or resumes the job under it, and renews
// it until it is stopped or loses it.
func (a *agent) schedule(ctx context.Context) error {
	holder := "scheduler-" + a.o.region
	// A restarted scheduler acts on the token it kept: it cannot know that
	// the lease moved on while it was gone. The fence must refuse it.
	if tok := readToken(a.o.stateFile); tok > 0 {
		err := a.writeJob(ctx, jobRecord{Job: a.o.job, State: "running", Region: a.o.region, Holder: holder, Token: tok, GPUs: 64, GPUType: "H100"})
		if err != nil {
			a.emit(agentEvent{Ev: "stale.refused", Token: tok, Err: errText(err)})
		} else {
			a.emit(agentEvent{Ev: "stale.accepted", Token: tok})
		}
	}
	waiting := ""
	var lease *kvpb.LeaseResponse
	for lease == nil {
		res, err := a.kv.KV.Lease(ctx, &kvpb.LeaseRequest{Op: "grant", Job: a.o.job, Holder: holder, TtlMs: a.o.ttl.Milliseconds(), TimeoutMs: 5_000})
		switch {
		case err == nil:
			lease = res
		case ctx.Err() != nil:
			return nil
		default:
			if msg := errText(err); msg != waiting {
				a.emit(agentEvent{Ev: "lease.waiting", Err: msg})
				waiting = msg
			}
			if err := pause(ctx, a.o.ttl/8); err != nil {
				return nil
			}
		}
	}
	a.emit(agentEvent{Ev: "lease.acquired", Token: lease.Token})
	if err := writeToken(a.o.stateFile, lease.Token); err != nil {
		return err
	}
	rec, found, err := a.readJob(ctx)
	if err != nil {
		return fmt.Errorf("read job record: %w", err)
	}
	if found && rec.Region != a.o.region {
		if err := a.resume(ctx, rec, holder, lease.Token); err != nil {
			return err
		}
	} else {
		rec = jobRecord{Job: a.o.job, State: "running", Region: a.o.region, Holder: holder, Token: lease.Token, GPUs: 64, GPUType: "H100"}
		if err := a.writeJob(ctx, rec); err != nil {
			return fmt.Errorf("write job record: %s", errText(err))
		}
		a.emit(agentEvent{Ev: "job.started", Token: lease.Token})
		if err := a.publish(ctx, jobEvent{Type: "started", Record: jobKey(a.o.job), Token: lease.Token, ID: fmt.Sprintf("%s/started/%d", a.o.job, lease.Token)}); err != nil {
			return err
		}
	}
	return a.renew(ctx, holder, lease.Token)
}

// renew keeps the lease well inside its TTL; a scheduler that cannot
// renew stops acting as the owner.
func (a *agent) renew(ctx context.Context, holder string, token uint64) error {
	for {
		if err := pause(ctx, a.o.ttl/4); err != nil {
			return nil
		}
		_, err := a.kv.KV.Lease(ctx, &kvpb.LeaseRequest{Op: "renew", Job: a.o.job, Holder: holder, Token: token, TimeoutMs: a.o.ttl.Milliseconds() / 2})
		if err != nil && ctx.Err() == nil {
			a.emit(agentEvent{Ev: "lease.lost", Token: token, Err: errText(err)})
			return nil
		}
	}
}

// resume takes over a job another region ran: the newest checkpoint that
// is stable here, its shards checked against the manifest, its lineage
// audited, then the job record moved here under the new token.
func (a *agent) resume(ctx context.Context, prev jobRecord, holder string, token uint64) error {
	m, key, err := a.newestStable(ctx)
	if err != nil {
		return err
	}
	a.emit(agentEvent{Ev: "resume.found", Step: m.Step, Key: key, Note: "previous owner " + prev.Region})
	n, err := a.verify(ctx, m)
	if err != nil {
		return err
	}
	a.emit(agentEvent{Ev: "resume.verified", Step: m.Step, Bytes: n})
	chain, err := a.audit(ctx, m.Step)
	if err != nil {
		return err
	}
	a.emit(agentEvent{Ev: "audit", Step: m.Step, Note: chain})
	rec := jobRecord{Job: a.o.job, State: "running", Region: a.o.region, Holder: holder, Token: token, Checkpoint: key, GPUs: 64, GPUType: "H100"}
	if err := a.writeJob(ctx, rec); err != nil {
		return fmt.Errorf("write job record: %s", errText(err))
	}
	a.emit(agentEvent{Ev: "job.resumed", Step: m.Step, Token: token, Key: key})
	return a.publish(ctx, jobEvent{Type: "migrated", Step: m.Step, Record: jobKey(a.o.job), Token: token, ID: fmt.Sprintf("%s/migrated/%d", a.o.job, token)})
}

// newestStable scans the job's manifests and returns the newest one that
// is stable under the predicate at this site.
func (a *agent) newestStable(ctx context.Context) (manifest, string, error) {
	res, err := a.kv.KV.Scan(ctx, &kvpb.ScanRequest{Prefix: "ckpt/" + a.o.job + "/", TimeoutMs: 10_000})
	if err != nil {
		return manifest{}, "", fmt.Errorf("scan manifests: %s", errText(err))
	}
	var keys []string
	for _, v := range res.Versions {
		keys = append(keys, v.Key)
	}
	slices.Sort(keys)
	for _, k := range slices.Backward(keys) {
		g, err := a.kv.Get(ctx, &kvpb.GetRequest{Key: k, Stable: a.o.predicate, TimeoutMs: 10_000})
		if err != nil {
			return manifest{}, "", fmt.Errorf("read %s: %s", k, errText(err))
		}
		if g.Version == nil || g.Version.Deleted {
			continue
		}
		var m manifest
		if err := json.Unmarshal(g.Version.Value, &m); err != nil {
			return manifest{}, "", fmt.Errorf("manifest %s: %w", k, err)
		}
		return m, k, nil
	}
	return manifest{}, "", fmt.Errorf("no manifest of %s is stable under %s here (of %d)", a.o.job, a.o.predicate, len(keys))
}

// verify checks every shard the manifest names against its size and hash
// in this region's synced folder, waiting for the folder to show the
// checkpoint (stabsync writes it once it is stable here).
func (a *agent) verify(ctx context.Context, m manifest) (int64, error) {
	deadline := time.Now().Add(60 * time.Second)
	var total int64
	for _, s := range m.Shards {
		for {
			err := shardHeld(a.o.folder, s, true)
			if err == nil {
				total += s.Size
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("shard %s: not in the folder with its manifest's hash within 60s (last: %v)", s.Path, err)
			}
			if err := pause(ctx, 20*time.Millisecond); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}

// audit reads the checkpoint's lineage back to the first checkpoint with
// snapshot reads: a consistent cut of edges stable under the predicate.
func (a *agent) audit(ctx context.Context, step int) (string, error) {
	var chain []string
	for s := step; s > 0; {
		var edges [3]string
		for i, e := range []string{"dataset", "code", "parent"} {
			g, err := a.kv.Get(ctx, &kvpb.GetRequest{Key: lineageKey(a.o.job, s, e), Snapshot: a.o.predicate, TimeoutMs: 10_000})
			if err != nil {
				return "", fmt.Errorf("lineage of %s: %s", ckptDir(s), errText(err))
			}
			if g.Version == nil || g.Version.Deleted {
				return "", fmt.Errorf("lineage of %s: edge %s missing from the snapshot", ckptDir(s), e)
			}
			edges[i] = string(g.Version.Value)
		}
		chain = append(chain, fmt.Sprintf("%s <- {%s, %s}", ckptDir(s), edges[0], edges[1]))
		next := 0
		if edges[2] != "" {
			if _, err := fmt.Sscanf(edges[2], "step-%d", &next); err != nil {
				return "", fmt.Errorf("lineage of %s: parent %q", ckptDir(s), edges[2])
			}
		}
		s = next
	}
	return strings.Join(chain, " <- "), nil
}

// train is the trainer: train a while, write a checkpoint's shards into the
// synced folder, commit it with its marker, and once the share says it is
// stable write its lineage and manifest under the predicate, point the job
// record at it (fenced) and announce it.
func (a *agent) train(ctx context.Context) error {
	conn, err := grpc.NewClient(a.o.client, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	fs := filesharepb.NewFileShareClient(conn)
	rec, err := a.waitOwner(ctx)
	if err != nil {
		return err
	}
	for step := 1; ; step++ {
		if err := pause(ctx, a.o.interval); err != nil {
			return nil
		}
		m, err := a.writeCheckpoint(ctx, step)
		if err != nil {
			return err
		}
		if err := a.waitShareStable(ctx, fs, m); err != nil {
			return err
		}
		a.emit(agentEvent{Ev: "ckpt.stable", Step: step})
		if err := a.record(ctx, m); err != nil {
			return err
		}
		rec.Checkpoint, rec.State = manifestKey(a.o.job, step), "running"
		if err := a.writeJob(ctx, rec); err != nil {
			a.emit(agentEvent{Ev: "fenced.refused", Step: step, Token: rec.Token, Err: errText(err)})
			return nil
		}
		id := fmt.Sprintf("%s/checkpointed/%d", a.o.job, step)
		if err := a.publish(ctx, jobEvent{Type: "checkpointed", Step: step, Record: manifestKey(a.o.job, step), ID: id}); err != nil {
			return err
		}
	}
}

// waitOwner waits until the job record names this region as its owner.
func (a *agent) waitOwner(ctx context.Context) (jobRecord, error) {
	for {
		rec, found, err := a.readJob(ctx)
		if err == nil && found && rec.Region == a.o.region {
			return rec, nil
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return jobRecord{}, err
		}
	}
}

func (a *agent) writeCheckpoint(ctx context.Context, step int) (manifest, error) {
	dir := filepath.Join(a.o.folder, ckptDir(step))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return manifest{}, err
	}
	a.emit(agentEvent{Ev: "ckpt.writing", Step: step})
	m := manifest{Job: a.o.job, Step: step, Wall: time.Now().UTC(), RNG: fmt.Sprintf("pcg:%d", step)}
	m.DataLoader.Epoch, m.DataLoader.Sample = step/10, step*4096
	if step > 1 {
		m.Parent = manifestKey(a.o.job, step-1)
	}
	var total int64
	for i := range a.o.shards {
		b := shardData(step, i, a.o.shardBytes)
		name := fmt.Sprintf("shard-%02d.bin", i)
		if err := writeSlowly(ctx, filepath.Join(dir, name), b, a.o.writeRate); err != nil {
			return manifest{}, err
		}
		total += int64(len(b))
		m.Shards = append(m.Shards, shardRef{Path: ckptDir(step) + "/" + name, Size: int64(len(b)), SHA256: sha256Hex(b)})
		a.emit(agentEvent{Ev: "shard.written", Step: step, Shard: i, Bytes: int64(len(b))})
	}
	// The marker last, as PyTorch's distributed checkpoint does: the
	// folder's commit rule publishes the directory as one commit then.
	if err := os.WriteFile(filepath.Join(dir, ".metadata"), fmt.Appendf(nil, `{"step":%d}`, step), 0o644); err != nil {
		return manifest{}, err
	}
	if err := syncDir(dir); err != nil {
		return manifest{}, err
	}
	a.emit(agentEvent{Ev: "ckpt.committed", Step: step, Bytes: total})
	return m, nil
}

// waitShareStable waits until every file of the checkpoint directory has a
// version at this site that is stable under the share's visibility. It
// asks per path: a listing of the whole share costs the site a stability
// check of every version it holds.
func (a *agent) waitShareStable(ctx context.Context, fs filesharepb.FileShareClient, m manifest) error {
	paths := []string{ckptDir(m.Step) + "/.metadata"}
	for _, s := range m.Shards {
		paths = append(paths, s.Path)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var err error
	for len(paths) > 0 {
		var res *filesharepb.ListResponse
		res, err = fs.List(ctx, &filesharepb.ListRequest{Share: a.o.share, Path: paths[0]})
		if err == nil && slices.ContainsFunc(res.Versions, func(v *filesharepb.Version) bool { return v.Stable && !v.Deleted }) {
			paths = paths[1:]
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("checkpoint %s: %s not stable in share %s within 2m (last error: %v)", ckptDir(m.Step), paths[0], a.o.share, err)
		}
		if err := pause(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// record writes the checkpoint's lineage edges, then its manifest, each
// acknowledged under the predicate: a manifest never names data or
// lineage that a region's loss could take.
func (a *agent) record(ctx context.Context, m manifest) error {
	parent := ""
	if m.Step > 1 {
		parent = ckptDir(m.Step - 1)
	}
	edges := map[string]string{"dataset": "dataset/imagenet-22k@v" + fmt.Sprint(3+m.Step/5), "code": "code/trainer@9f2c1e7", "parent": parent}
	var wg sync.WaitGroup
	errs := make(chan error, len(edges))
	for e, v := range edges {
		wg.Go(func() {
			if _, err := a.kv.Put(ctx, lineageKey(a.o.job, m.Step, e), []byte(v), a.o.predicate, 30*time.Second); err != nil {
				errs <- fmt.Errorf("lineage %s: %s", e, errText(err))
			}
		})
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	if err := errors.Join(failed...); err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	res, err := a.kv.Put(ctx, manifestKey(a.o.job, m.Step), b, a.o.predicate, 30*time.Second)
	if err != nil {
		return fmt.Errorf("manifest %s: %s", ckptDir(m.Step), errText(err))
	}
	a.emit(agentEvent{Ev: "manifest.acked", Step: m.Step, Seq: res.Seq, Key: manifestKey(a.o.job, m.Step)})
	return nil
}

// watch is a dashboard: every job event, and for each, whether the record
// it announces is already readable here under the predicate (stable) — an
// event seen before that is early, the failure the scenario checks for.
func (a *agent) watch(ctx context.Context) error {
	sub, err := a.ps.Subscribe(ctx, a.o.topic, pubsubclient.Durable("dashboard-"+a.o.region), pubsubclient.StartAll())
	if err != nil {
		return err
	}
	a.emit(agentEvent{Ev: "dashboard.subscribed"})
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var ev jobEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			a.emit(agentEvent{Ev: "event.seen", ID: m.ID, Err: "not a job event: " + err.Error()})
			_ = m.Ack()
			continue
		}
		early, why := a.early(ctx, ev)
		a.emit(agentEvent{Ev: "event.seen", ID: ev.ID, Step: ev.Step, Key: ev.Record, Seq: m.Seq, Early: early, Note: ev.Type, Err: why})
		_ = m.Ack()
	}
}

// early reports whether the record ev announces is not yet stable here.
func (a *agent) early(ctx context.Context, ev jobEvent) (bool, string) {
	req := &kvpb.GetRequest{Key: ev.Record, Stable: a.o.predicate, TimeoutMs: 10_000}
	if strings.HasPrefix(ev.Record, "/lin/") {
		req.Stable = "" // linearizable: whatever a read returns is committed
	}
	g, err := a.kv.Get(ctx, req)
	if err != nil {
		return true, "read " + ev.Record + ": " + errText(err)
	}
	if g.Version == nil || g.Version.Deleted {
		return true, ev.Record + " not stable here yet"
	}
	switch ev.Type {
	case "checkpointed":
		var m manifest
		if json.Unmarshal(g.Version.Value, &m) != nil || m.Step != ev.Step {
			return true, fmt.Sprintf("%s holds another step", ev.Record)
		}
	case "migrated", "started":
		var r jobRecord
		if json.Unmarshal(g.Version.Value, &r) != nil || r.Token < ev.Token {
			return true, fmt.Sprintf("%s does not hold token %d yet", ev.Record, ev.Token)
		}
	}
	return false, ""
}

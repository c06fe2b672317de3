package workload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/wan"
)

type jobRecord struct {
	ID           string `json:"id"`
	OwnerRegion  string `json:"owner_region"`
	State        string `json:"state"`
	GPUs         int    `json:"gpus"`
	GPUType      string `json:"gpu_type"`
	Workers      int    `json:"elastic_workers"`
	Checkpoint   string `json:"current_checkpoint"`
	LeaseHolder  string `json:"lease_holder"`
	FencingToken uint64 `json:"fencing_token"`
	Notes        string `json:"notes"`
}

type shard struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Hash string `json:"sha256"`
}

type manifest struct {
	Job        string   `json:"job"`
	Step       int      `json:"step"`
	WallTime   string   `json:"wall_time"`
	Shards     []shard  `json:"shards"`
	Optimizer  []shard  `json:"optimizer_shards"`
	DataLoader string   `json:"data_loader_position"`
	RNG        []uint64 `json:"rng_states"`
	Parent     string   `json:"parent"`
}

type lineageEdge struct {
	Inputs []string `json:"inputs"`
	Output string   `json:"output"`
	Commit string   `json:"code_commit"`
}

// Record is one key and value a writer puts, and which of the platform's
// records it is: "job", "manifest" or "lineage".
type Record struct {
	Key   string
	Value []byte
	Kind  string
}

// Gen makes the records one writer site writes: the same records for the
// same site and seed, on every machine and in every release, so that runs
// stay comparable.
type Gen struct {
	r    *rand.Rand
	site string
	step int
}

// NewGen returns the generator of site's records from seed.
func NewGen(site string, seed uint64) *Gen {
	return &Gen{r: rand.New(rand.NewPCG(seed, uint64(len(site)))), site: site}
}

func (g *Gen) hash() string { return fmt.Sprintf("%016x%016x", g.r.Uint64(), g.r.Uint64()) }

// Next returns the next record: mostly job updates, a manifest and a
// lineage edge at every checkpoint.
func (g *Gen) Next() Record {
	g.step++
	job := fmt.Sprintf("job-%s-%02d", g.site, g.r.IntN(8))
	switch g.step % 5 {
	case 0:
		m := manifest{Job: job, Step: g.step * 100, WallTime: time.Unix(1764400000+int64(g.step), 0).UTC().Format(time.RFC3339),
			DataLoader: fmt.Sprintf("epoch=3 batch=%d", g.step*17), Parent: fmt.Sprintf("ckpt-%s-%d", job, g.step-5)}
		for i := range 24 {
			m.Shards = append(m.Shards, shard{Path: fmt.Sprintf("s3://ckpt/%s/%d/model-%03d.pt", job, g.step, i), Size: 1 << 26, Hash: g.hash()})
		}
		for i := range 8 {
			m.Optimizer = append(m.Optimizer, shard{Path: fmt.Sprintf("s3://ckpt/%s/%d/optim-%03d.pt", job, g.step, i), Size: 1 << 27, Hash: g.hash()})
		}
		for range 8 {
			m.RNG = append(m.RNG, g.r.Uint64())
		}
		b, _ := json.Marshal(m)
		return Record{Key: fmt.Sprintf("ckpt/%s/%06d", job, g.step), Value: b, Kind: "manifest"}
	case 1:
		e := lineageEdge{Inputs: []string{"dataset/imagenet@v7", "preproc/resize-224@v3", fmt.Sprintf("ckpt/%s/%06d", job, g.step-1)},
			Output: fmt.Sprintf("ckpt/%s/%06d", job, g.step), Commit: g.hash()[:12]}
		b, _ := json.Marshal(e)
		return Record{Key: fmt.Sprintf("lineage/%s/%06d", job, g.step), Value: b, Kind: "lineage"}
	}
	states := []string{"queued", "running", "checkpointing", "preempted", "migrating", "running"}
	// Notes pad the record to the 0.5-2 KB of a real one.
	notes := make([]byte, 400+g.r.IntN(600))
	for i := range notes {
		notes[i] = 'a' + byte(g.r.IntN(26))
	}
	j := jobRecord{ID: job, OwnerRegion: g.site, State: states[g.r.IntN(len(states))], GPUs: 8 << g.r.IntN(3), GPUType: "H100",
		Workers: 1 + g.r.IntN(16), Checkpoint: fmt.Sprintf("ckpt/%s/%06d", job, g.step/5*5), LeaseHolder: "scheduler-" + g.site,
		FencingToken: uint64(g.step), Notes: string(notes)}
	b, _ := json.Marshal(j)
	return Record{Key: "jobs/" + job, Value: b, Kind: "job"}
}

// Bound is the least latency the RTT matrix allows for a write from site w
// under predicate p: the smallest T such that the sites within round trip
// T of w (w itself at 0) satisfy p. It assumes p reads acks one round trip
// away; a predicate that is not satisfiable gives -1.
func Bound(topo *wan.Topology, p *frontier.Predicate, schema *frontier.Schema, w string) time.Duration {
	wi, _ := schema.SiteIndex(w)
	type sr struct {
		i   int
		rtt time.Duration
	}
	var byRTT []sr
	for i, s := range schema.Sites {
		d := time.Duration(0)
		if s != w {
			d, _ = topo.RTT(w, s)
		}
		byRTT = append(byRTT, sr{i, d})
	}
	sort.SliceStable(byRTT, func(a, b int) bool { return byRTT[a].rtt < byRTT[b].rtt })
	var set frontier.SiteSet
	for _, x := range byRTT {
		set |= frontier.SiteSetOf(x.i)
		if p.Holds(set, wi, wi) {
			return x.rtt
		}
	}
	return -1
}

// Percentile returns the q-quantile (0..1) of ds, nearest rank; 0 for none.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

// RaftBound is the least latency of a write through a leader-based
// consensus group, leader at leader, from site w: to the leader and back
// (nothing when w leads), plus the leader's round trip to the nearest
// majority, itself counting at 0 (a commit for a write, a heartbeat round
// confirming leadership for a linearizable read).
func RaftBound(topo *wan.Topology, leader, w string) time.Duration {
	var rtts []time.Duration
	for _, s := range topo.Sites {
		d := time.Duration(0)
		if s != leader {
			d, _ = topo.RTT(leader, s)
		}
		rtts = append(rtts, d)
	}
	slices.Sort(rtts)
	maj := rtts[len(rtts)/2]
	if w == leader {
		return maj
	}
	d, _ := topo.RTT(w, leader)
	return d + maj
}

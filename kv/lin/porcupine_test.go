package lin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model of one key for porcupine. A key's version is the raft index of
// its last write: unpredictable, but it must match between reads and grow
// with every write. After a write whose outcome is unknown the model
// forgets the version until an operation reports it.
type kvState struct {
	exists  bool
	value   string
	version uint64
	known   bool // version is known
}

type opKind uint8

const (
	opKindPut opKind = iota
	opKindGet
	opKindCASValue
	opKindCASVersion
)

type linInput struct {
	kind  opKind
	key   string
	value string // put, cas: the new value
	old   string // cas on value: the expected value
	ver   uint64 // cas on version: the expected version
}

type linOutput struct {
	unknown bool // the write may or may not have happened
	ok      bool // cas: it swapped
	exists  bool // get / failed cas: the key existed
	value   string
	version uint64 // get / failed cas: current version; put / cas: the new version
}

func (in linInput) String() string {
	switch in.kind {
	case opKindPut:
		return fmt.Sprintf("put(%s=%s)", in.key, in.value)
	case opKindGet:
		return fmt.Sprintf("get(%s)", in.key)
	case opKindCASValue:
		return fmt.Sprintf("cas(%s: %s→%s)", in.key, in.old, in.value)
	}
	return fmt.Sprintf("cas(%s: v%d→%s)", in.key, in.ver, in.value)
}

func stepKV(st, i, o any) []any {
	s, in, out := st.(kvState), i.(linInput), o.(linOutput)
	written := func(version uint64, known bool) []any {
		if known && s.known && version <= s.version {
			return nil // versions must grow
		}
		return []any{kvState{exists: true, value: in.value, version: version, known: known}}
	}
	// observed checks a reported current state against the model's and
	// learns the version.
	observed := func(exists bool, value string, version uint64) []any {
		if exists != s.exists || (exists && value != s.value) || (s.known && version != s.version) {
			return nil
		}
		return []any{kvState{exists: s.exists, value: s.value, version: version, known: true}}
	}
	switch in.kind {
	case opKindPut:
		if out.unknown {
			return written(0, false)
		}
		return written(out.version, true)
	case opKindGet:
		return observed(out.exists, out.value, out.version)
	case opKindCASValue, opKindCASVersion:
		var match, decided bool
		if in.kind == opKindCASValue {
			match, decided = s.exists && s.value == in.old, true
		} else if s.known {
			match, decided = s.version == in.ver, true
		}
		switch {
		case out.unknown && !decided:
			return append(written(0, false), s)
		case out.unknown && match:
			return written(0, false)
		case out.unknown:
			return []any{s}
		case out.ok:
			if decided && !match {
				return nil
			}
			return written(out.version, true)
		default:
			if decided && match {
				return nil
			}
			if in.kind == opKindCASVersion && out.version == in.ver {
				return nil
			}
			return observed(out.exists, out.value, out.version)
		}
	}
	return nil
}

var kvModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(linInput).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range by {
				if !yield(k) {
					return
				}
			}
		}) {
			out = append(out, by[k])
		}
		return out
	},
	Init:  func() []any { return []any{kvState{known: true}} },
	Step:  stepKV,
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(i, o any) string {
		out := o.(linOutput)
		switch {
		case out.unknown:
			return fmt.Sprintf("%v → ?", i)
		case i.(linInput).kind == opKindGet || !out.ok && i.(linInput).kind != opKindPut:
			return fmt.Sprintf("%v → %v %q v%d ok=%v", i, out.exists, out.value, out.version, out.ok)
		}
		return fmt.Sprintf("%v → v%d", i, out.version)
	},
	DescribeState: func(st any) string {
		s := st.(kvState)
		return fmt.Sprintf("%v %q v%d known=%v", s.exists, s.value, s.version, s.known)
	},
}).ToModel()

// history records operations for porcupine; time is monotonic nanoseconds
// since the test began.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// acked is the highest acknowledged write version per key.
	acked map[string]uint64
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(client int, in linInput, call int64, out linOutput) {
	ret := h.now()
	if out.unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	if !out.unknown && (in.kind == opKindPut || out.ok) {
		h.acked[in.key] = max(h.acked[in.key], out.version)
	}
}

// runOp performs one operation at n and records it, unless it certainly did
// not happen (a read that failed, a write refused before it was proposed).
func runOp(ctx context.Context, h *history, client int, n *Node, in linInput) (linOutput, bool) {
	call := h.now()
	var out linOutput
	var err error
	switch in.kind {
	case opKindPut:
		out.version, err = n.Put(ctx, in.key, []byte(in.value))
	case opKindGet:
		var it Item
		it, err = n.Get(ctx, in.key)
		if errors.Is(err, ErrNotFound) {
			err = nil
		} else if err == nil {
			out.exists, out.value, out.version = true, string(it.Value), it.Version
		}
	case opKindCASValue, opKindCASVersion:
		cond := IfValue([]byte(in.old))
		if in.kind == opKindCASVersion {
			cond = IfVersion(in.ver)
		}
		out.version, err = n.CompareAndSwap(ctx, in.key, cond, []byte(in.value))
		out.ok = err == nil
		var ce *CompareError
		if errors.As(err, &ce) {
			out.exists, out.value, out.version, err = ce.Exists, string(ce.Value), ce.Version, nil
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrUnknownOutcome) && in.kind != opKindGet:
		out.unknown = true
	default:
		return out, false
	}
	h.add(client, in, call, out)
	return out, true
}

func TestLinearizable(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-sites", n), func(t *testing.T) { testLinearizable(t, n) })
	}
}

func testLinearizable(t *testing.T, size int) {
	c := newCluster(t, size, nil)
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	for i, a := range c.sites {
		for _, b := range c.sites[i+1:] {
			c.net.SetDelay(a, b, time.Duration(500+rng.IntN(2500))*time.Microsecond)
		}
	}
	c.waitLeader(c.sites, 5*time.Second)
	h := &history{start: time.Now(), acked: map[string]uint64{}}
	keys := []string{"job/1", "job/2", "job/3"}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var unknown atomic.Int64
	for i := range 2 * size {
		site := c.sites[i%size]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 42))
			seen := map[string]linOutput{}
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				n := c.node(site)
				if n == nil {
					time.Sleep(5 * time.Millisecond) // the site is down: back off
					continue
				}
				key := keys[r.IntN(len(keys))]
				in := linInput{key: key, value: fmt.Sprintf("c%d-%d", i, seq)}
				last := seen[key]
				switch p := r.IntN(100); {
				case p < 35:
					in.kind = opKindPut
				case p < 70:
					in.kind = opKindGet
				case p < 85:
					in.kind, in.old = opKindCASValue, last.value
				default:
					in.kind, in.ver = opKindCASVersion, last.version
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				out, ok := runOp(ctx, h, i, n, in)
				cancel()
				if !ok {
					continue
				}
				if out.unknown {
					unknown.Add(1)
					continue
				}
				switch {
				case in.kind == opKindGet || !out.ok && in.kind != opKindPut:
					seen[key] = out
				default:
					seen[key] = linOutput{exists: true, value: in.value, version: out.version}
				}
			}
		}()
	}

	phase := func(d time.Duration) {
		// Let the clients run; the faults below are what is being tested.
		time.Sleep(d)
	}
	phase(300 * time.Millisecond)

	// 1. Kill the leader, let the others elect a new one, bring it back.
	leader := c.waitLeader(c.sites, 5*time.Second)
	t.Logf("killing leader %s", leader)
	c.stop(leader)
	rest := slices.DeleteFunc(slices.Clone(c.sites), func(s string) bool { return s == leader })
	if size == 5 {
		// With five sites, also cut off a minority member meanwhile.
		t.Logf("partitioning %s", rest[0])
		c.net.Partition([]string{rest[0]}, c.sites)
		c.waitLeader(rest[1:], 5*time.Second)
	} else {
		c.waitLeader(rest, 5*time.Second)
	}
	phase(300 * time.Millisecond)
	c.start(leader)
	c.net.Heal()
	phase(200 * time.Millisecond)

	// 2. Partition a minority that holds the leader: the majority elects
	// another while the old leader still believes it leads.
	leader = c.waitLeader(c.sites, 5*time.Second)
	minority := []string{leader}
	for _, s := range c.sites {
		if len(minority) < (size-1)/2 && s != leader {
			minority = append(minority, s)
		}
	}
	t.Logf("partitioning minority %v", minority)
	c.net.Partition(minority, c.sites)
	majority := slices.DeleteFunc(slices.Clone(c.sites), func(s string) bool { return slices.Contains(minority, s) })
	c.waitLeader(majority, 5*time.Second)
	phase(300 * time.Millisecond)
	c.net.Heal()

	// 3. Kill the new leader once more.
	leader = c.waitLeader(c.sites, 5*time.Second)
	t.Logf("killing leader %s", leader)
	c.stop(leader)
	phase(300 * time.Millisecond)
	c.start(leader)
	c.waitLeader(c.sites, 5*time.Second)
	phase(200 * time.Millisecond)
	close(stop)
	wg.Wait()

	// Final reads at every site: every acknowledged write is still there
	// (porcupine checks these reads against the history too).
	for _, s := range c.sites {
		for _, k := range keys {
			var out linOutput
			err := retry(t, 5*time.Second, func(ctx context.Context) error {
				var ok bool
				out, ok = runOp(ctx, h, 100, c.node(s), linInput{kind: opKindGet, key: k})
				if !ok {
					return context.DeadlineExceeded
				}
				return nil
			})
			if err != nil {
				t.Fatalf("final get %s at %s: %v", k, s, err)
			}
			if out.version < h.acked[k] {
				t.Errorf("final get %s at %s: version %d, but version %d was acknowledged", k, s, out.version, h.acked[k])
			}
		}
	}

	t.Logf("%d operations recorded, %d with unknown outcome", len(h.ops), unknown.Load())
	if len(h.ops) < 100 {
		t.Errorf("only %d operations completed", len(h.ops))
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, h.ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("lin-porcupine-%d.html", size))
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("history of %d operations is not linearizable", len(h.ops))
	default:
		t.Fatalf("linearizability check inconclusive: %v", res)
	}
}

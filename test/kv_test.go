package test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
)

var three = []string{"us-east-1", "eu-west-1", "ap-south-1"}

func TestKvctlPutAllReadElsewhere(t *testing.T) {
	c := startCluster(t, three...)
	out, errOut, code := c.kvctl("us-east-1", "put", "jobs/7", `{"state":"running","gpus":8}`, "--wait", "all", "-o", "json")
	if code != 0 {
		t.Fatalf("put: exit %d: %s", code, errOut)
	}
	var w struct {
		Origin  string `json:"origin"`
		Seq     uint64 `json:"seq"`
		Session string `json:"session"`
	}
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Origin != "us-east-1" || w.Seq == 0 {
		t.Fatalf("put output %q: %v", out, err)
	}
	for _, s := range three[1:] {
		out, errOut, code := c.kvctl(s, "get", "jobs/7", "-o", "json", "--session", w.Session)
		if code != 0 {
			t.Fatalf("get at %s: exit %d: %s", s, code, errOut)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"key", "value", "origin", "seq", "hlc"} {
			if _, ok := v[k]; !ok {
				t.Fatalf("get -o json lacks %q: %s", k, out)
			}
		}
		if v["value"] != `{"state":"running","gpus":8}` || v["origin"] != "us-east-1" {
			t.Fatalf("get at %s: %s", s, out)
		}
	}
	_, errOut, code = c.kvctl("eu-west-1", "get", "jobs/none")
	if code == 0 || !strings.Contains(errOut, `key "jobs/none" not found`) {
		t.Fatalf("missing key: exit %d, %q", code, errOut)
	}
	_, errOut, code = c.kvctl("eu-west-1", "put", "k", "v", "--wait", "majorty")
	if code == 0 || !strings.Contains(errOut, "unknown predicate") || !strings.Contains(errOut, "majority") {
		t.Fatalf("unknown predicate: exit %d, %q", code, errOut)
	}
}

// TestKill9DuringMajorityWrites: writers at every site write under
// majority; one site is killed with SIGKILL mid-way and restarted. Every
// write that was acknowledged is at every site afterwards, the restarted
// one included.
func TestKill9DuringMajorityWrites(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type acked struct{ key, value string }
	var mu sync.Mutex
	var ok []acked
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, site := range three {
		cl, err := kvclient.Dial(c.info(site).Client)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("ckpt/%s/%04d", site, i)
				val := fmt.Sprintf("manifest %s %d", site, i)
				_, err := cl.Put(ctx, key, []byte(val), "majority", 3*time.Second)
				mu.Lock()
				if err == nil {
					ok = append(ok, acked{key, val})
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the site is down: do not spin
				}
			}
		}()
	}
	deadline, _ := ctx.Deadline()
	waitAcked := func(n int) {
		until(t, deadline, func() error {
			mu.Lock()
			k := len(ok)
			mu.Unlock()
			if k >= n {
				return nil
			}
			return fmt.Errorf("only %d writes acknowledged", k)
		})
	}
	waitAcked(100)
	c.kill9("ap-south-1")
	mu.Lock()
	atKill := len(ok)
	mu.Unlock()
	waitAcked(atKill + 100)
	c.start("ap-south-1")
	waitAcked(atKill + 200)
	close(stop)
	wg.Wait()
	t.Logf("%d writes acknowledged under majority, %d failed while ap-south-1 was down", len(ok), failed)

	// Every acknowledged write, at every site: wait until each site has
	// applied every origin's stream as far as its writer got, then read.
	for _, site := range three {
		cl, err := kvclient.Dial(c.info(site).Client)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, a := range ok {
			var got *kvpb.GetResponse
			until(t, deadline, func() error {
				if got, err = cl.KV.Get(ctx, &kvpb.GetRequest{Key: a.key, Quorum: "majority"}); err != nil {
					return fmt.Errorf("%s: acknowledged write %s=%q lost: %w", site, a.key, a.value, err)
				}
				return nil
			})
			if err != nil || string(got.Version.Value) != a.value {
				t.Fatalf("%s: acknowledged write %s=%q lost: %v %v", site, a.key, a.value, got, err)
			}
		}
	}
	// The restarted site caught up: its own latest state has them all.
	cl, err := kvclient.Dial(c.info("ap-south-1").Client)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	caughtUp := time.Now().Add(30 * time.Second)
	for _, a := range ok {
		until(t, caughtUp, func() error {
			got, err := cl.KV.Get(ctx, &kvpb.GetRequest{Key: a.key})
			if err == nil && string(got.Version.Value) == a.value {
				return nil
			}
			return fmt.Errorf("restarted ap-south-1 never applied %s: %v", a.key, err)
		})
	}
}

func TestConcurrentWritersConvergeAcrossProcesses(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, site := range three {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kvclient.Dial(c.info(site).Client)
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for i := range 100 {
				if _, err := cl.Put(ctx, fmt.Sprintf("jobs/%d", i%5), []byte(fmt.Sprintf("owner=%s n=%d", site, i)), "none", 0); err != nil {
					t.Error(err)
					return
				}
			}
			// A last write under all: once it returns, every site has
			// persisted everything this writer wrote before it.
			if _, err := cl.Put(ctx, "done/"+site, []byte("1"), "min(applied(sites))", 20*time.Second); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range 5 {
		key := fmt.Sprintf("jobs/%d", i)
		var first string
		for j, site := range three {
			out, errOut, code := c.kvctl(site, "get", key, "-o", "json")
			if code != 0 {
				t.Fatalf("get %s at %s: %s", key, site, errOut)
			}
			if j == 0 {
				first = out
			} else if out != first {
				t.Fatalf("%s differs: %s has %s, %s has %s", key, three[0], first, site, out)
			}
		}
	}
}

// TestShutdownWithOpenWriteStream: a client's write stream, open and idle,
// does not hold up a site's graceful shutdown (5 s at most before it stops
// the requests still running): the site asks the client to close it.
func TestShutdownWithOpenWriteStream(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kvclient.Dial(c.info("us-east-1").Client)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Put(ctx, "jobs/1", []byte("v"), "majority", 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.stop("us-east-1")
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("shutdown took %s with a write stream open", d)
	}
	if _, err := cl.Put(ctx, "jobs/2", []byte("v"), "majority", 0); err == nil {
		t.Error("a write to a stopped site succeeded")
	}
}

// The first write of a site, right after every site connected, is not held
// up by the channel's resend timeout (3 s): the answer to a Hello that left
// before the answering site's own connection was up is sent again when it
// comes up. Before, it was lost and the write waited for the resend.
func TestFirstWriteAfterStartNotHeldByResend(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	waitConnected(t, c, deadline)
	for _, site := range three {
		cl, err := kvclient.Dial(c.info(site).Client)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = cl.Put(ctx, "jobs/first-"+site, []byte(`{"state":"queued"}`), "majority", 10*time.Second)
		took := time.Since(start)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Far below the resend timeout, far above a slow machine's write.
		if took > 1500*time.Millisecond {
			t.Fatalf("first write at %s took %v: a channel waited for its resend timeout", site, took)
		}
	}
}

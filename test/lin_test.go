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

func TestLinearizableThroughKvctl(t *testing.T) {
	c := startCluster(t, three...)
	out, errOut, code := c.kvctl("eu-west-1", "cas", "/lin/jobs/7/owner", "eu-west-1", "--if-absent", "-o", "json")
	if code != 0 {
		t.Fatalf("cas --if-absent: %s", errOut)
	}
	var w struct{ Version uint64 }
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Version == 0 {
		t.Fatalf("cas output %q: %v", out, err)
	}
	_, errOut, code = c.kvctl("us-east-1", "cas", "/lin/jobs/7/owner", "us-east-1", "--if-absent")
	if code == 0 || !strings.Contains(errOut, fmt.Sprintf("have version %d", w.Version)) || !strings.Contains(errOut, `"eu-west-1"`) {
		t.Fatalf("second cas --if-absent: exit %d: %s", code, errOut)
	}
	out, _, code = c.kvctl("ap-south-1", "get", "/lin/jobs/7/owner")
	if code != 0 || strings.TrimSpace(out) != "eu-west-1" {
		t.Fatalf("linearizable get: %q", out)
	}
	out, errOut, code = c.kvctl("us-east-1", "lease", "grant", "jobs/7", "--holder", "us-east-1", "--ttl", "20s", "-o", "json")
	if code != 0 {
		t.Fatalf("grant: %s", errOut)
	}
	var l struct{ Token uint64 }
	_ = json.Unmarshal([]byte(out), &l)
	_, errOut, code = c.kvctl("eu-west-1", "lease", "grant", "jobs/7", "--holder", "eu-west-1")
	if code == 0 || !strings.Contains(errOut, "held by us-east-1") {
		t.Fatalf("competing grant: exit %d: %s", code, errOut)
	}
	tok := fmt.Sprint(l.Token)
	if _, errOut, code = c.kvctl("eu-west-1", "cas", "/lin/jobs/7/state", "running", "--lease", "jobs/7", "--token", tok); code != 0 {
		t.Fatalf("fenced write with the current token: %s", errOut)
	}
	if _, _, code = c.kvctl("eu-west-1", "cas", "/lin/jobs/7/state", "stale", "--lease", "jobs/7", "--token", fmt.Sprint(l.Token+1)); code == 0 {
		t.Fatal("a fenced write with a wrong token went through")
	}
}

// TestLinearizableSurvivesLeaderKill9: writes acknowledged by the Raft
// group survive the leader's SIGKILL, and the group goes on with a new
// leader.
func TestLinearizableSurvivesLeaderKill9(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	leader := func(site string) string {
		cl, err := kvclient.Dial(c.info(site).Client)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var l string
		until(t, deadline, func() error {
			st, err := cl.Admin.Status(ctx, &kvpb.StatusRequest{})
			if err == nil && st.Lin != nil && st.Lin.Leader != "" {
				l = st.Lin.Leader
				return nil
			}
			return fmt.Errorf("no leader: %v", err)
		})
		return l
	}
	first := leader("eu-west-1")
	var writer string
	for _, s := range three {
		if s != first {
			writer = s
			break
		}
	}
	cl, err := kvclient.Dial(c.info(writer).Client)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	acked := map[string]string{}
	put := func(i int) {
		key, val := fmt.Sprintf("/lin/jobs/%d", i), fmt.Sprintf("state-%d", i)
		if _, err := cl.Put(ctx, key, []byte(val), "", 5*time.Second); err == nil {
			mu.Lock()
			acked[key] = val
			mu.Unlock()
		}
	}
	for i := range 20 {
		put(i)
	}
	c.kill9(first)
	for i := 20; i < 40; i++ {
		put(i)
	}
	c.start(first)
	if got := len(acked); got < 25 {
		t.Fatalf("only %d of 40 writes acknowledged across the leader's kill", got)
	}
	for _, site := range three {
		r, err := kvclient.Dial(c.info(site).Client)
		if err != nil {
			t.Fatal(err)
		}
		for key, val := range acked {
			var res *kvpb.GetResponse
			// Errors while a new leader is being elected: retry.
			until(t, deadline, func() error {
				if res, err = r.KV.Get(ctx, &kvpb.GetRequest{Key: key, TimeoutMs: 5000}); err != nil {
					return fmt.Errorf("%s: acknowledged %s=%s: %w", site, key, val, err)
				}
				return nil
			})
			if err != nil || string(res.Version.Value) != val {
				t.Fatalf("%s: acknowledged %s=%s: got %v %v", site, key, val, res, err)
			}
		}
		r.Close()
	}
	t.Logf("leader %s killed; %d of 40 writes acknowledged, all read back at every site", first, len(acked))
}

package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// TestWipedSiteRestoresThroughKills: a site loses its data directory and
// comes back empty. Peers hold its own writes, so it copies its state of
// them from a peer (state transfer, slowed to 1 MB/s so that it takes
// seconds) before it writes again. The receiver is killed with SIGKILL
// mid-transfer and resumes from what it stored, then the source is killed
// mid-transfer and the receiver resumes from the source's checkpoint once
// it is back. Writes at another site go on throughout; at the end the
// wiped site reads every acknowledged write, and its own new write takes
// a seq after the ones it gave out before the wipe.
func TestWipedSiteRestoresThroughKills(t *testing.T) {
	c := genCluster(t, three...)
	for _, s := range c.sites {
		appendConfig(t, s.Config, "state_transfer_rate: 1000000\n")
	}
	for _, s := range c.sites {
		c.start(s.Site)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	wiped := "ap-south-1"
	cw := dial(t, c, wiped)
	// 4 MB of the wiped site's own job records, held by its peers:
	// about 4 s of transfer at the rate set above.
	record := strings.Repeat("x", 4000)
	want := map[string]string{}
	var last uint64
	var wmu sync.Mutex
	var load sync.WaitGroup
	for w := range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := w; i < 1000; i += 8 {
				k := fmt.Sprintf("jobs/%s/%05d", wiped, i)
				v := fmt.Sprintf(`{"job":%d,"state":"done","log":"%s"}`, i, record)
				res, err := cw.Put(ctx, k, []byte(v), "all", 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				wmu.Lock()
				want[k], last = v, max(last, res.Seq)
				wmu.Unlock()
			}
		}()
	}
	load.Wait()
	if t.Failed() {
		return
	}
	cw.Close()
	t.Logf("loaded %d records at %s", len(want), wiped)

	// Writes at another site go on while the wiped site restores.
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := dial(t, c, "eu-west-1")
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k, v := fmt.Sprintf("jobs/eu-west-1/%05d", i), fmt.Sprintf(`{"job":%d,"state":"running"}`, i)
			if _, err := cl.Put(ctx, k, []byte(v), "majority", 5*time.Second); err == nil {
				mu.Lock()
				want[k] = v
				mu.Unlock()
			}
		}
	}()

	t.Logf("wiping %s", wiped)
	c.kill9(wiped)
	if err := os.RemoveAll(filepath.Join(c.dir, wiped)); err != nil {
		t.Fatal(err)
	}
	c.start(wiped)
	midTransfer(t, c, wiped, deadline)
	t.Logf("killing %s mid-transfer", wiped)
	c.kill9(wiped)
	c.start(wiped)
	until(t, deadline, func() error {
		if !strings.Contains(c.log(wiped), "resume=true") {
			return fmt.Errorf("%s did not resume its transfer after the kill", wiped)
		}
		return nil
	})
	midTransfer(t, c, wiped, deadline)
	src := transferSource(t, c, wiped)
	t.Logf("killing the source %s mid-transfer", src)
	c.kill9(src)
	c.start(src)

	// Done: the wiped site writes again, after its old seqs.
	cw = dial(t, c, wiped)
	defer cw.Close()
	var res *kvpb.WriteResponse
	until(t, deadline, func() error {
		var err error
		res, err = cw.Put(ctx, "jobs/"+wiped+"/after", []byte(`{"state":"queued"}`), "majority", 5*time.Second)
		return err
	})
	if res.Seq <= last {
		t.Fatalf("%s wrote seq %d after the wipe, at or below the %d it wrote before", wiped, res.Seq, last)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		var got *kvpb.GetResponse
		until(t, deadline, func() error {
			var err error
			got, err = cw.Get(ctx, &kvpb.GetRequest{Key: k, Stable: "majority", TimeoutMs: 5000})
			return err
		})
		if string(got.Version.Value) != v {
			t.Fatalf("%s after the wipe: %s = %.40q, want %.40q", wiped, k, got.Version.Value, v)
		}
	}
	if !strings.Contains(c.log(src), "resume=true") {
		t.Errorf("the source %s never served a resumed transfer (did it restart mid-transfer?)", src)
	}
	t.Logf("%d writes read back at %s; its first write after the wipe has seq %d (last before: %d)", len(want), wiped, res.Seq, last)
}

func dial(t *testing.T, c *cluster, site string) *kvclient.Client {
	t.Helper()
	cl, err := kvclient.Dial(c.info(site).Client)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func appendConfig(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// transfer is a state transfer as status.json lists it.
type transfer struct {
	Stream            struct{ Origin, Name string }
	Source            string
	Bytes, TotalBytes uint64
}

func transfers(c *cluster, site string) ([]transfer, error) {
	resp, err := http.Get("http://" + c.info(site).HTTP + "/status.json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v struct{ Transfers []transfer }
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.Transfers, err
}

// midTransfer waits until site is partway through a state transfer.
func midTransfer(t *testing.T, c *cluster, site string, deadline time.Time) {
	t.Helper()
	until(t, deadline, func() error {
		ts, err := transfers(c, site)
		if err != nil {
			return err
		}
		for _, tr := range ts {
			if tr.Bytes > 0 && tr.Bytes < tr.TotalBytes/2 {
				return nil
			}
		}
		return fmt.Errorf("%s is not partway through a transfer: %+v", site, ts)
	})
}

func transferSource(t *testing.T, c *cluster, site string) string {
	t.Helper()
	ts, err := transfers(c, site)
	if err != nil || len(ts) == 0 || ts[0].Source == "" {
		t.Fatalf("%s: no transfer with a source: %+v, %v", site, ts, err)
	}
	return ts[0].Source
}

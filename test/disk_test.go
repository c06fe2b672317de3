package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// The full site's filesystem: a 96 MiB tmpfs holding its data directory and
// a filler file, with a reserve of 24 MiB. About 20 MiB are left for the
// job records that fill it; deleting the filler frees 48 MiB, past the
// reserve and its 16 MiB of slack.
const (
	diskSize    = 96 << 20
	diskReserve = 24 << 20
	diskFiller  = 48 << 20
	jobRecord   = 4 << 10
)

// TestDiskFullSite: eu-west-1 keeps its data on a small filesystem that job
// records written there fill. It then refuses writes (ResourceExhausted,
// saying the disk is full), keeps answering reads and keeps acknowledging,
// while the other sites keep taking writes under one_remote. Once the test
// deletes a file to free space, eu-west-1 takes writes again by itself and
// catches up: its stable reads show what the others wrote meanwhile, and
// every write that was acknowledged anywhere is readable everywhere.
func TestDiskFullSite(t *testing.T) {
	fs := mountTmpfs(t, diskSize)
	c := genCluster(t, three...)
	const full = "eu-west-1"
	placeDataDir(t, c.info(full).Config, filepath.Join(fs, full), diskReserve)
	filler := filepath.Join(fs, "filler")
	writeFiller(t, filler, diskFiller)
	for _, s := range c.sites {
		c.start(s.Site)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	waitConnected(t, c, deadline)
	cls := map[string]*kvclient.Client{}
	for _, s := range three {
		cl, err := kvclient.Dial(c.info(s).Client)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cls[s] = cl
	}
	acked := map[string]string{} // key -> value of every acknowledged write

	refused := fillSite(t, ctx, cls[full], full, acked)
	for _, want := range []string{"disk full", "site " + full, "free under " + filepath.Join(fs, full), "reserve 24.0 MiB"} {
		if !strings.Contains(status.Convert(refused).Message(), want) {
			t.Errorf("refusal %q lacks %q", status.Convert(refused).Message(), want)
		}
	}
	t.Logf("%s full after %d job records of %d bytes: %s", full, len(acked), jobRecord, status.Convert(refused).Message())
	checkFull(t, ctx, c, cls[full], full, acked)

	// The other sites take writes under a predicate that does without the
	// full site, which drops their data.
	var during []string
	for i := range 20 {
		for _, s := range []string{"us-east-1", "ap-south-1"} {
			key, val := fmt.Sprintf("jobs/%s/during-%02d", s, i), record(s, i)
			if _, err := cls[s].Put(ctx, key, []byte(val), "one_remote", 10*time.Second); err != nil {
				t.Fatalf("write at %s while %s is full: %v", s, full, err)
			}
			acked[key] = val
			during = append(during, key)
		}
	}
	until(t, deadline, func() error {
		if n := metric(t, c.info(full), "stabilizer_disk_full_dropped_frames_total", ""); n <= 0 {
			return fmt.Errorf("%s dropped no data frame while full (%v)", full, n)
		}
		return nil
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// No restart and no operator: the next write looks at the disk again.
	until(t, deadline, func() error {
		key, val := "jobs/"+full+"/after", record(full, -1)
		if _, err := cls[full].Put(ctx, key, []byte(val), "majority", 5*time.Second); err != nil {
			return fmt.Errorf("write at %s after freeing %d MiB: %w", full, diskFiller>>20, err)
		}
		acked[key] = val
		return nil
	})
	// Caught up: what the others wrote while it was full is stable at
	// every site, eu-west-1 included, and it says so.
	for _, key := range during {
		until(t, deadline, func() error { return readStable(ctx, cls[full], key, acked[key]) })
	}
	for _, s := range three {
		for key, val := range acked {
			until(t, deadline, func() error { return readStable(ctx, cls[s], key, val) })
		}
	}
	if log := c.log(full); !strings.Contains(log, "disk full: refusing appends") || !strings.Contains(log, "disk space back") {
		t.Errorf("%s's log lacks the lines on becoming full and recovering:\n%s", full, log)
	}
	if v := metric(t, c.info(full), "stabilizer_disk_full{", ""); v != 0 {
		t.Errorf("stabilizer_disk_full at %s is %v once space is back", full, v)
	}
}

// fillSite writes job records at site from several writers until one is
// refused, and returns the refusal, which must say the disk is full;
// acknowledged writes go into acked.
func fillSite(t *testing.T, ctx context.Context, cl *kvclient.Client, site string, acked map[string]string) error {
	t.Helper()
	var mu sync.Mutex
	var refused error
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	// The site has room for about 20 MiB of them, written twice (the log
	// and the KV state): far fewer than this bound.
	const most = diskSize / jobRecord
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < most; i += 8 {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("jobs/%s/%05d", site, i), record(site, i)
				_, err := cl.Put(ctx, key, []byte(val), "majority", 10*time.Second)
				mu.Lock()
				if err == nil {
					acked[key] = val
				} else if refused == nil {
					refused = err
				}
				mu.Unlock()
				if err != nil {
					once.Do(func() { close(stop) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if refused == nil {
		t.Fatalf("%d job records written at %s and none refused: is the site's data on the %d MiB filesystem?", len(acked), site, diskSize>>20)
	}
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("the first write refused at %s after %d: %v, want ResourceExhausted (disk full)", site, len(acked), refused)
	}
	return refused
}

// checkFull checks a full site from outside: kvctl says why it refuses
// writes, reads answer, and the metrics and the status page say it is full.
func checkFull(t *testing.T, ctx context.Context, c *cluster, cl *kvclient.Client, site string, acked map[string]string) {
	t.Helper()
	_, errOut, code := c.kvctl(site, "put", "jobs/"+site+"/kvctl", record(site, -2), "--wait", "majority")
	if code == 0 || !strings.Contains(errOut, "disk full") || !strings.Contains(errOut, "out of disk space") {
		t.Errorf("kvctl put at a full site: exit %d, %q", code, errOut)
	}
	n := 0
	for key, val := range acked {
		got, err := cl.Get(ctx, &kvpb.GetRequest{Key: key})
		if err != nil || string(got.Version.Value) != val {
			t.Fatalf("read of %s at full %s: %v", key, site, err)
		}
		if n++; n == 50 {
			break
		}
	}
	if v := metric(t, c.info(site), "stabilizer_disk_full{", ""); v != 1 {
		t.Errorf("stabilizer_disk_full at %s is %v, want 1", site, v)
	}
	resp, err := http.Get("http://" + c.info(site).HTTP + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(page, []byte("<span class=down>FULL</span>")) {
		t.Errorf("the status page of full %s does not say FULL", site)
	}
}

// readStable checks that a stable read (every site persisted it) at cl
// returns val for key.
func readStable(ctx context.Context, cl *kvclient.Client, key, val string) error {
	got, err := cl.Get(ctx, &kvpb.GetRequest{Key: key, Stable: "all"})
	if err != nil {
		return fmt.Errorf("stable read of acknowledged %s: %w", key, err)
	}
	if string(got.Version.Value) != val {
		return fmt.Errorf("stable read of acknowledged %s: %.40q…, want %.40q…", key, got.Version.Value, val)
	}
	return nil
}

// record is a job record of jobRecord bytes: the fields a scheduler keeps
// and an annotation that pads it, different for every job.
func record(site string, i int) string {
	head := fmt.Sprintf(`{"id":"job-%s-%d","owner":%q,"state":"running","gpus":8,"gpu_type":"H100","workers":4,`+
		`"checkpoint":"ckpt-%d-000120","lease":{"holder":"sched-%s","token":%d},"annotations":"`, site, i, site, i, site, i+1)
	r := rand.New(rand.NewPCG(uint64(i+3), uint64(len(site))))
	pad := make([]byte, jobRecord-len(head)-2)
	for j := range pad {
		pad[j] = 'a' + byte(r.IntN(26))
	}
	return head + string(pad) + `"}`
}

// mountTmpfs mounts a tmpfs of size bytes on a new folder, unmounted when
// the test ends (after the sites started later stopped), or skips the test
// when it cannot.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("this test fills a %d MiB tmpfs it mounts, and mount -t tmpfs failed (uid %d; it needs root or CAP_SYS_ADMIN): %v: %s",
			size>>20, os.Geteuid(), err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// placeDataDir points a site's config at dir with a reserve of free space.
func placeDataDir(t *testing.T, config, dir string, reserve int64) {
	t.Helper()
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^data_dir: .*$`)
	if !re.Match(b) {
		t.Fatalf("%s has no data_dir line:\n%s", config, b)
	}
	b = re.ReplaceAll(b, []byte(fmt.Sprintf("data_dir: %s\nmin_free_bytes: %d", dir, reserve)))
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFiller writes a file of size bytes, which takes that much of a tmpfs.
func writeFiller(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xf0}, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

package site

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
	"github.com/stabilizer/stabilizer/fileshare"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/pubsub"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestConsole renders the console of a running three-site cluster (real
// sites on loopback, as stabilizerd runs them) and checks what it shows:
// every site, links connected with a measured round trip, frontiers with
// their lag, a topic's subscription with its backlog, a share with a
// version pending, and, once one site is down, the predicate `all`
// stalled with what it waits for.
func TestConsole(t *testing.T) {
	us, eu, ap := "us-east-1", "eu-west-1", "ap-northeast-1"
	gen, err := siteconfig.Generate(siteconfig.GenerateOptions{Sites: []string{us, eu, ap}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string]*Site{}
	httpAddr := map[string]string{}
	for _, g := range gen {
		cfg, err := siteconfig.Load(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		s, err := start(cfg, stabilizertest.Logger(t, g.Site), consoleOptions{SampleEvery: 50 * time.Millisecond, StallAfter: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		sites[g.Site], httpAddr[g.Site] = s, g.HTTP
		t.Cleanup(func() { shutdown(t, sites, g.Site) })
	}
	ctx := t.Context()
	page := func(site string) string {
		t.Helper()
		return get(t, "http://"+httpAddr[site]+"/")
	}
	status := func(site string) statusView {
		t.Helper()
		var v statusView
		if err := json.Unmarshal([]byte(get(t, "http://"+httpAddr[site]+"/status.json")), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Every link up with a round trip measured.
	stabilizertest.Eventually(t, 0, func() error {
		for _, l := range status(us).Links[1:] {
			if !l.Connected || l.RTTSeconds <= 0 {
				return fmt.Errorf("link to %s: %+v", l.Site, l)
			}
		}
		return nil
	})

	// Data: a write, a topic with a durable subscription nobody reads
	// from, a share.
	s := sites[us]
	if _, err := s.store.Put(ctx, "config/a", []byte("1"), kv.WriteOptions{Wait: "all"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.broker.CreateTopic(ctx, pubsub.Topic{Name: "jobs"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.broker.Subscribe(ctx, pubsub.SubOptions{Topic: "jobs", Durable: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for i := range 3 {
		if _, err := s.broker.Publish(ctx, pubsub.Message{Topic: "jobs", Data: fmt.Appendf(nil, "job %d", i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.files.CreateShare(ctx, &filesharepb.Share{Name: "ckpt", Visibility: "all"}); err != nil {
		t.Fatal(err)
	}

	// ap-northeast-1 goes down: what us-east-1 writes now is persisted by
	// a majority, never by all.
	shutdown(t, sites, ap)
	stabilizertest.Eventually(t, 0, func() error {
		if status(us).Connected[ap] {
			return fmt.Errorf("%s still connected", ap)
		}
		return nil
	})
	// Lag and "stalled for" count from the first write all does not cover,
	// not from the last one it does: time passes in between (no
	// synchronisation waits on this sleep; it only makes the two differ).
	time.Sleep(1500 * time.Millisecond)
	put, err := s.store.Put(ctx, "config/b", []byte("2"), kv.WriteOptions{Wait: "majority"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.files.Commit(ctx, "ckpt", []*filesharepb.FileVersion{{Path: "empty.txt", Mode: 0o644, Mtime: 1}},
		fileshare.CommitOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}

	stream := us + "/kv"
	stabilizertest.Eventually(t, 0, func() error {
		v := status(us)
		for _, st := range v.Stalled {
			if st.Stream == stream && st.Predicate == "all" && st.Head >= put.Seq {
				return nil
			}
		}
		return fmt.Errorf("stalled: %+v", v.Stalled)
	})
	if m := get(t, "http://"+httpAddr[us]+"/metrics"); !strings.Contains(m, `stabilizer_build_info{goversion="go`) {
		t.Errorf("/metrics lacks stabilizer_build_info")
	}
	asked := time.Now()
	v := status(us)
	answered := time.Now()
	html := page(us)
	want := []string{
		// Every site, the links with their state and round trip.
		"<td class=l><b>us-east-1</b></td><td class=l><span class=\"dot self\"></span>this site",
		"<td class=l><b>eu-west-1</b></td><td class=l><span class=\"dot up\"></span><span class=up>connected</span></td><td class=num>",
		"<td class=l><b>ap-northeast-1</b></td><td class=l><span class=\"dot down\"></span><span class=down>not connected</span>",
		"1 of 2 peers connected",
		// The stream's frontiers with lag and a sparkline.
		"us-east-1/kv — head",
		"<td class=l><b>majority</b></td>",
		"lag over the last",
		// The stalled predicate and what it waits for.
		"Stalled frontiers",
		"<span class=\"tag stalled\">STALLED",
		"waits for persisted: ap-northeast-1=",
		// The topic, its subscription and backlog.
		"jobs — 3 messages stored here",
		"<td class=l><b>workers</b> <span class=mute>at us-east-1</span></td>",
		// The share and its pending version.
		"<td class=l><b>ckpt</b></td><td class=l><code>all</code></td>",
	}
	for _, w := range want {
		if !strings.Contains(html, w) {
			t.Errorf("console lacks %q", w)
		}
	}
	// A measured round trip beside the connected link.
	if !regexp.MustCompile(`<b>eu-west-1</b>.*<span class=up>connected</span></td><td class=num>[0-9.]+ ms</td>`).MatchString(html) {
		t.Errorf("console shows no round trip to eu-west-1")
	}
	if t.Failed() {
		t.Logf("console:\n%s", html)
	}

	// status.json: the same, for tools.
	var kvAll *frontierView
	for i := range v.Streams {
		if st := &v.Streams[i]; st.Origin == us && st.Stream == "kv" {
			for j := range st.Frontiers {
				if st.Frontiers[j].Predicate == "all" {
					kvAll = &st.Frontiers[j]
				}
			}
		}
	}
	if kvAll != nil {
		// The first write all does not cover: config/b, or a record the
		// applications wrote after ap-northeast-1 went down. The status
		// was computed between asked and answered.
		e, err := s.node.ReadEntry(ctx, stabilizer.StreamID{Origin: us, Name: "kv"}, kvAll.Seq+1)
		if err != nil {
			t.Fatal(err)
		}
		written := time.Unix(0, e.HLC.Wall)
		least, most := asked.Sub(written).Seconds()-0.1, answered.Sub(written).Seconds()+0.1
		d, err := time.ParseDuration(kvAll.StalledFor)
		if kvAll.LagSeconds < least || kvAll.LagSeconds > most || err != nil || d > answered.Sub(written)+time.Second {
			t.Errorf("us-east-1/kv's all: lag %.2f s, stalled for %q, but its first uncovered write (seq %d) was %.2f-%.2f s old",
				kvAll.LagSeconds, kvAll.StalledFor, kvAll.Seq+1, least+0.1, most-0.1)
		}
	}
	if kvAll == nil || !kvAll.Stalled || kvAll.Behind == 0 || kvAll.LagSeconds <= 0 || len(kvAll.History) == 0 ||
		len(kvAll.WaitsFor) != 1 || !strings.HasPrefix(kvAll.WaitsFor[0], "persisted: ap-northeast-1=") {
		t.Errorf("us-east-1/kv's all in status.json: %+v", kvAll)
	}
	stabilizertest.Eventually(t, 0, func() error {
		v := status(us)
		if len(v.Topics) != 1 || len(v.Topics[0].Subs) != 1 || v.Topics[0].Subs[0].Unacked != 3 {
			return fmt.Errorf("topics: %+v", v.Topics)
		}
		if len(v.Shares) != 1 || v.Shares[0].Pending != 1 {
			return fmt.Errorf("shares: %+v", v.Shares)
		}
		return nil
	})
	if html := page(us); !strings.Contains(html, `<td class="num behind">3</td>`) || !strings.Contains(html, `<td class="num behind">1</td>`) {
		t.Errorf("console lacks the backlog of 3 or the pending version:\n%s", html)
	}
}

func shutdown(t *testing.T, sites map[string]*Site, site string) {
	s := sites[site]
	if s == nil {
		return
	}
	delete(sites, site)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shut down %s: %v", site, err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return string(b)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/stabilizer/stabilizer/test/bench/internal/loadgen"
	"github.com/stabilizer/stabilizer/test/bench/internal/peerapi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchpeers etcd-member|etcd-leader|etcd-wan-load|etcd-tput|nats-server|nats-tput|nats-ps FLAGS (started by wanbench kv and wanbench pubsub)")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"etcd-member": etcdMember, "etcd-leader": etcdLeader, "etcd-wan-load": etcdWANLoad, "etcd-tput": etcdTput,
		"nats-server": natsServer, "nats-tput": natsTput, "nats-ps": natsPS,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "benchpeers: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

func parseURL(s string) (url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return url.URL{}, err
	}
	return *u, nil
}

// etcdMember runs one embedded etcd member until SIGTERM.
func etcdMember(args []string) error {
	var c peerapi.EtcdMember
	if err := readJSONFlag("etcd-member", "config", "member config (JSON)", args, &c); err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = c.Name, c.Dir
	for _, x := range []struct {
		dst *[]url.URL
		src string
	}{{&cfg.ListenPeerUrls, c.ListenPeer}, {&cfg.ListenClientUrls, c.ListenClient}, {&cfg.AdvertisePeerUrls, c.AdvertisePeer}, {&cfg.AdvertiseClientUrls, c.AdvertiseClient}} {
		u, err := parseURL(x.src)
		if err != nil {
			return err
		}
		*x.dst = []url.URL{u}
	}
	cfg.InitialCluster = c.InitialCluster
	cfg.InitialClusterToken = "wanbed-bench"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs, cfg.ElectionMs = c.TickMs, c.ElectionMs
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, stop := signalContext()
	defer stop()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd member %s ready\n", c.Name)
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}

func etcdClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdLeader waits for a leader and moves leadership to --want (empty:
// any); it prints the leader's name.
func etcdLeader(args []string) error {
	fs := flag.NewFlagSet("etcd-leader", flag.ContinueOnError)
	eps := fs.String("endpoints", "", "name=host:port,... of every member")
	want := fs.String("want", "", "member to lead")
	timeout := fs.Duration("timeout", 90*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var names, addrs []string
	for _, p := range strings.Split(*eps, ",") {
		n, a, _ := strings.Cut(p, "=")
		names, addrs = append(names, n), append(addrs, a)
	}
	var cls []*clientv3.Client
	for _, a := range addrs {
		cl, err := etcdClient(a)
		if err != nil {
			return err
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	ctx, stop := signalContext()
	defer stop()
	ids := map[uint64]int{}
	deadline := time.Now().Add(*timeout)
	last := errors.New("no leader yet")
	for time.Now().Before(deadline) && ctx.Err() == nil {
		leader := -1
		ok := true
		for i, cl := range cls {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(sctx, addrs[i])
			cancel()
			if err != nil {
				last, ok = fmt.Errorf("member %s: %w", names[i], err), false
				break
			}
			ids[st.Header.MemberId] = i
			if li, found := ids[st.Leader]; found && st.Leader != 0 {
				leader = li
			}
		}
		if ok && leader >= 0 && len(ids) == len(cls) {
			if *want == "" || names[leader] == *want {
				fmt.Println(names[leader])
				return nil
			}
			for id, i := range ids {
				if names[i] == *want {
					mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := cls[leader].MoveLeader(mctx, id)
					cancel()
					if err != nil {
						last = fmt.Errorf("move leader from %s to %s: %w", names[leader], *want, err)
					}
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return last
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// etcdWANLoad runs a closed loop per region against its own member and
// prints []peerapi.Result. Progress goes to stderr, one line per 10% of the writes.
func etcdWANLoad(args []string) error {
	var l peerapi.WANLoad
	if err := readJSONFlag("etcd-wan-load", "in", "WANLoad (JSON)", args, &l); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	total := 0
	for _, r := range l.Regions {
		total += len(l.Records[r]) - l.Warmup
	}
	var done atomic.Int64
	out := make([]peerapi.Result, len(l.Regions))
	var wg sync.WaitGroup
	for i, region := range l.Regions {
		cl, err := etcdClient(l.Members[region])
		if err != nil {
			return err
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := peerapi.Result{Region: region}
			for n, kv := range l.Records[region] {
				if res.Errors >= 5 || ctx.Err() != nil {
					break
				}
				pctx, cancel := context.WithTimeout(ctx, l.Timeout)
				t0 := time.Now()
				_, err := cl.Put(pctx, kv.Key, string(kv.Value))
				d := time.Since(t0)
				cancel()
				if n < l.Warmup && err == nil {
					continue
				}
				if err != nil {
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
					continue
				}
				res.LatMs = append(res.LatMs, msOf(d))
				if k := done.Add(1); total >= 10 && k%int64(total/10) == 0 {
					fmt.Fprintf(os.Stderr, "etcd: %d/%d writes\n", k, total)
				}
			}
			res.Ops = len(res.LatMs)
			out[i] = res
		}()
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(out)
}

// tput runs inflight closed-loop writers for warm+dur and counts the writes
// that completed inside the measured window.
func tput(ctx context.Context, inflight, valueBytes int, warm, dur time.Duration, put loadgen.Put) peerapi.Result {
	r := loadgen.ClosedLoop(ctx, inflight, valueBytes, warm, dur, put)
	res := peerapi.Result{Errors: r.Errors, Ops: len(r.Lat), OpsPerS: float64(len(r.Lat)) / dur.Seconds()}
	if r.FirstError != nil {
		res.FirstError = r.FirstError.Error()
	}
	for _, d := range r.Lat {
		res.LatMs = append(res.LatMs, msOf(d))
	}
	return res
}

type tputFlags struct {
	endpoints       *string
	inflight, conns *int
	valueBytes      *int
	warm, dur       *time.Duration
}

func newTputFlags(fs *flag.FlagSet) tputFlags {
	return tputFlags{
		endpoints:  fs.String("endpoints", "", "comma-separated addresses of every member"),
		inflight:   fs.Int("inflight", 64, "writes in flight"),
		conns:      fs.Int("conns", 4, "connections per member"),
		valueBytes: fs.Int("value-bytes", 256, "value size"),
		warm:       fs.Duration("warm", 2*time.Second, "unmeasured warm-up"),
		dur:        fs.Duration("duration", 8*time.Second, "measured window"),
	}
}

// etcdTput measures writes/s of an etcd cluster and prints one peerapi.Result.
func etcdTput(args []string) error {
	fs := flag.NewFlagSet("etcd-tput", flag.ContinueOnError)
	f := newTputFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cls []*clientv3.Client
	for range *f.conns {
		for _, ep := range strings.Split(*f.endpoints, ",") {
			cl, err := etcdClient(ep)
			if err != nil {
				return err
			}
			defer cl.Close()
			cls = append(cls, cl)
		}
	}
	ctx, stop := signalContext()
	defer stop()
	res := tput(ctx, *f.inflight, *f.valueBytes, *f.warm, *f.dur, func(ctx context.Context, w int, key string, value []byte) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := cls[w%len(cls)].Put(pctx, key, string(value))
		return err
	})
	return json.NewEncoder(os.Stdout).Encode(res)
}

// natsServer runs one nats-server from a config file until SIGTERM.
func natsServer(args []string) error {
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	path := fs.String("config", "", "nats-server config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := server.ProcessConfigFile(*path)
	if err != nil {
		return err
	}
	if !opts.SyncAlways {
		return errors.New("the config must set jetstream sync_interval: always (equal durability)")
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("not ready for connections within 30s")
	}
	fmt.Fprintf(os.Stderr, "nats server %s ready\n", opts.ServerName)
	ctx, stop := signalContext()
	defer stop()
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsTput makes an R3 KV bucket (once) and measures writes/s.
func natsTput(args []string) error {
	fs := flag.NewFlagSet("nats-tput", flag.ContinueOnError)
	f := newTputFlags(fs)
	bucket := fs.String("bucket", "bench", "KV bucket")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	var kvs []jetstream.KeyValue
	eps := strings.Split(*f.endpoints, ",")
	for c := range *f.conns {
		for i, ep := range eps {
			var nc *nats.Conn
			var err error
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if nc, err = nats.Connect("nats://" + ep); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
					break
				}
			}
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			var kv jetstream.KeyValue
			deadline := time.Now().Add(60 * time.Second)
			for {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if c == 0 && i == 0 {
					kv, err = js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: *bucket, Replicas: 3, Storage: jetstream.FileStorage, History: 1})
				} else {
					kv, err = js.KeyValue(cctx, *bucket)
				}
				cancel()
				if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
					break
				}
				time.Sleep(300 * time.Millisecond)
			}
			if err != nil {
				return fmt.Errorf("bucket %s on %s: %w", *bucket, ep, err)
			}
			kvs = append(kvs, kv)
		}
	}
	res := tput(ctx, *f.inflight, *f.valueBytes, *f.warm, *f.dur, func(ctx context.Context, w int, key string, value []byte) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := kvs[w%len(kvs)].Put(pctx, strings.ReplaceAll(key, "/", "."), value)
		return err
	})
	return json.NewEncoder(os.Stdout).Encode(res)
}

// readJSONFlag parses a command's one flag, the path of a JSON file, and
// decodes that file into v: how wanbench hands each job over.
func readJSONFlag(cmd, name, usage string, args []string, v any) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	path := fs.String(name, "", usage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"
)

// natsConfig is one server of a 3-server JetStream cluster on loopback.
// sync_interval: always makes every replica fsync each write before it is
// acknowledged (JetStream's default syncs every two minutes), so a KV put
// that returns is fsynced at a majority of an R3 bucket, as ours is under
// majority.
const natsConfig = `server_name: %s
listen: %s
jetstream {
  store_dir: %q
  sync_interval: always
}
cluster {
  name: wanbed-bench
  listen: %s
  routes: [%s]
}
`

func benchNATSTput(ctx context.Context, o benchOptions, dir string, res *benchResults) error {
	peers, err := findBenchPeers()
	if err != nil {
		res.skipRow(phaseTput, sysNATS, "R3", "loopback", "skipped: "+err.Error())
		return nil
	}
	names := []string{"us-east-1", "eu-west-1", "ap-northeast-1"}
	ports, err := local.FreePorts(2 * len(names))
	if err != nil {
		return err
	}
	clientsAt, routesAt := ports[:len(names)], ports[len(names):]
	var routes []string
	for _, r := range routesAt {
		routes = append(routes, "nats-route://"+r)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var procs []*proc
	defer func() { stopAll(procs, o.progress) }()
	for i, n := range names {
		path := filepath.Join(dir, n+".conf")
		conf := fmt.Sprintf(natsConfig, n, clientsAt[i], filepath.Join(dir, n), routesAt[i], strings.Join(routes, ", "))
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return err
		}
		p, err := start(peers, filepath.Join(dir, n+".log"), "nats-server", "--config", path)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	fmt.Fprintf(o.progress, "nats: 3 servers on loopback (%s)\n", dir)
	if err := peerTput(ctx, o, peers, "nats-tput", sysNATS, "R3", strings.Join(clientsAt, ","), res); err != nil {
		return err
	}
	res.note("Throughput, NATS JetStream KV (nats-server v2.15.2, nats.go v1.55.0): 3 embedded servers (separate processes) clustered on loopback, an R3 file-backed bucket, `sync_interval: always` so that every replica fsyncs each write before it counts; writers spread evenly over the servers and over %s connections per server (each count in turn), clients in their own process (benchpeers).", joinInts(o.conns))
	return nil
}

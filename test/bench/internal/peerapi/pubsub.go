package peerapi

import (
	"fmt"
	"strings"

	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
)

// NATSCluster is the cluster name of the pub/sub bench's NATS servers.
const NATSCluster = "wanbench-pubsub"

// NATSRegionTag prefixes the tag that names a NATS server's region; the
// servers' unique_tag, so that no two replicas of a stream share a region.
const NATSRegionTag = "region:"

// NATSServer is one nats-server of `wanbench pubsub`; Conf renders the file
// `benchpeers nats-server --config` reads.
type NATSServer struct {
	// Name is the server's name: its region.
	Name string `json:"name"`
	// Listen is the client address (host:port).
	Listen string `json:"listen"`
	// Cluster is the address routes are accepted on; Advertise, if set,
	// the one the others are told to dial (a wan.Demux in front of it).
	Cluster   string `json:"cluster"`
	Advertise string `json:"advertise,omitempty"`
	// Routes are the other servers' cluster addresses, as they advertise
	// them.
	Routes   []string `json:"routes"`
	StoreDir string   `json:"store_dir"`
}

// Conf is the server's configuration file. It follows the NATS
// maintainers' multi-region guidance (github.com/ripienaar/multi-region-nats:
// one cluster of routes across the regions, each server tagged with its
// region, unique_tag on that tag, R3 streams) and sets sync_interval:
// always, so that every replica fsyncs each entry of a stream's Raft log
// before it counts towards the quorum (nats-server v2.15.2, server/opts.go
// and the Raft WAL in server/jetstream_cluster.go). Clients are not told of
// other servers (cluster no_advertise), so a client stays with its region's.
func (s NATSServer) Conf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %q\nlisten: %q\nserver_tags: [%q]\n", s.Name, s.Listen, NATSRegionTag+s.Name)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n  unique_tag: %q\n}\n", s.StoreDir, NATSRegionTag)
	fmt.Fprintf(&b, "cluster {\n  name: %q\n  listen: %q\n", NATSCluster, s.Cluster)
	if s.Advertise != "" {
		fmt.Fprintf(&b, "  advertise: %q\n", s.Advertise)
	}
	var routes []string
	for _, r := range s.Routes {
		routes = append(routes, fmt.Sprintf("%q", "nats-route://"+r))
	}
	fmt.Fprintf(&b, "  no_advertise: true\n  routes: [%s]\n}\n", strings.Join(routes, ", "))
	return b.String()
}

// PSJob is what `benchpeers nats-ps --in FILE` reads: the servers, what to
// set up, and one load to run against them.
type PSJob struct {
	// Servers maps each region to its server's client address.
	Servers map[string]string `json:"servers"`
	Stream  string            `json:"stream"`
	// Create makes the stream (R3, file storage) if it does not exist;
	// Delete removes it after the load.
	Create bool `json:"create,omitempty"`
	Delete bool `json:"delete,omitempty"`
	// Leader, if set, moves the stream's leader to that region's server
	// before the load.
	Leader string `json:"leader,omitempty"`
	// ConsumerLeaders says where each durable consumer's leader is moved:
	// "subscriber" (its subscriber's region), "stream" (with the stream's
	// leader), or "" (where NATS put it); natsps.Config.ConsumerLeaders.
	ConsumerLeaders string `json:"consumer_leaders,omitempty"`
	// Loop or Async is the load; neither: only the set-up.
	Loop  *psload.LoopConfig  `json:"loop,omitempty"`
	Async *psload.AsyncConfig `json:"async,omitempty"`
}

// PSResult is what `benchpeers nats-ps` prints.
type PSResult struct {
	// LeaderBefore and LeaderAfter lead the stream when the load began and
	// when it ended.
	LeaderBefore string `json:"leader_before"`
	LeaderAfter  string `json:"leader_after"`
	// ConsumerLeaders names the server leading each durable consumer.
	ConsumerLeaders map[string]string   `json:"consumer_leaders,omitempty"`
	Loop            *psload.LoopResult  `json:"loop,omitempty"`
	Async           *psload.AsyncResult `json:"async,omitempty"`
}

package peerapi

import "time"

// EtcdMember is what `benchpeers etcd-member --config FILE` reads.
type EtcdMember struct {
	Name            string `json:"name"`
	Dir             string `json:"dir"`
	ListenPeer      string `json:"listen_peer"`
	ListenClient    string `json:"listen_client"`
	AdvertisePeer   string `json:"advertise_peer"`
	AdvertiseClient string `json:"advertise_client"`
	InitialCluster  string `json:"initial_cluster"`
	TickMs          uint   `json:"heartbeat_ms"`
	ElectionMs      uint   `json:"election_ms"`
}

// WANLoad is what `benchpeers etcd-wan-load --in FILE` reads: per region,
// its member's client address and the records its client writes, one at a
// time.
type WANLoad struct {
	Warmup  int                   `json:"warmup"`
	Regions []string              `json:"regions"`
	Members map[string]string     `json:"members"`
	Records map[string][]KeyValue `json:"records"`
	Timeout time.Duration         `json:"timeout"`
}

// KeyValue is one record.
type KeyValue struct {
	Key   string `json:"k"`
	Value []byte `json:"v"`
}

// Result is one region's (or one throughput run's) measurements, as
// benchpeers prints them.
type Result struct {
	Region     string    `json:"region"`
	LatMs      []float64 `json:"lat_ms"`
	Errors     int       `json:"errors"`
	FirstError string    `json:"first_error,omitempty"`
	Ops        int       `json:"ops"`
	OpsPerS    float64   `json:"ops_per_s,omitempty"`
}

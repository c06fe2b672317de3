package siteconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stabilizer/stabilizer/frontier"
)

// Config is one site's configuration file.
type Config struct {
	// Site is this site's name; it must be one of Sites.
	Site string `yaml:"site"`
	// Cluster names the cluster; sites of different clusters refuse each
	// other. Default "stabilizer".
	Cluster string `yaml:"cluster,omitempty"`
	// Sites are all sites of the cluster, in the same order at every site.
	// The entry of this site may omit its addresses.
	Sites []Site `yaml:"sites"`
	// Groups maps a group name to its member sites, e.g. us: [us-east-1].
	Groups map[string][]string `yaml:"groups,omitempty"`
	// Listen are this site's own listen addresses.
	Listen Listen `yaml:"listen"`
	// DataDir holds the site's pebble database. Relative paths are taken
	// from the config file's folder.
	DataDir string `yaml:"data_dir"`
	// MinFreeBytes is the free space to keep under DataDir, in bytes: below
	// it the site is full and refuses writes (ResourceExhausted, "disk
	// full") and its peers' data, while reads go on, until space is freed;
	// it then takes writes again and catches up by itself. Default 256 MiB,
	// at most 5% of the filesystem; -1 turns the guard off.
	MinFreeBytes int64 `yaml:"min_free_bytes,omitempty"`
	// StateTransferRate bounds, in bytes per second, the snapshot data
	// this site sends to a peer that catches up by state transfer (a site
	// that lost its disk, or was down longer than its peers keep their
	// logs). 0 or unset: no bound but the transfer's window and the link.
	StateTransferRate int64 `yaml:"state_transfer_rate,omitempty"`
	// Predicates are named predicates besides the built-in ones.
	Predicates map[string]string `yaml:"predicates,omitempty"`
	// Levels are custom acknowledgement levels applications may report.
	Levels []string `yaml:"levels,omitempty"`
	// KV configures the key/value store.
	KV KV `yaml:"kv,omitempty"`
	// PubSub configures pub/sub; zero fields take pubsub's defaults.
	PubSub PubSub `yaml:"pubsub,omitempty"`
	// Files configures file sharing; zero fields take fileshare's defaults.
	Files Files `yaml:"files,omitempty"`
	// Lin configures the linearizable mode (a Raft group across sites).
	Lin Lin `yaml:"lin,omitempty"`
	// Insecure must be true to run without TLS (local use only).
	Insecure bool `yaml:"insecure,omitempty"`
	// TLS are the files for mutual TLS between sites and with clients.
	TLS TLS `yaml:"tls,omitempty"`
	// LogLevel is trace, debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level,omitempty"`

	dir string // the config file's folder
}

// Site is one member of the cluster and how this site reaches it.
type Site struct {
	Name    string `yaml:"name"`
	Data    string `yaml:"data,omitempty"`    // peer data plane
	Control string `yaml:"control,omitempty"` // peer control plane
	Client  string `yaml:"client,omitempty"`  // client gRPC API (quorum reads go here)
}

// Listen are a site's own listen addresses.
type Listen struct {
	Data    string `yaml:"data"`
	Control string `yaml:"control"`
	Client  string `yaml:"client"`
	HTTP    string `yaml:"http"`
}

// KV configures the key/value store; zero fields take the defaults below.
type KV struct {
	// DefaultWait is the predicate a write waits for when the request names
	// none. Default "majority".
	DefaultWait string `yaml:"default_wait,omitempty"`
	// DefaultTimeout bounds a wait when the request sets no deadline.
	// Default 10s.
	DefaultTimeout time.Duration `yaml:"default_timeout,omitempty"`
	// MaxKeyBytes defaults to 4096, MaxValueBytes to 4 MiB (a file's version
	// record names its chunks: 4 MiB holds some 70,000 refs, a file of about
	// 30 GiB).
	MaxKeyBytes   int `yaml:"max_key_bytes,omitempty"`
	MaxValueBytes int `yaml:"max_value_bytes,omitempty"`
	// Retention bounds what the site keeps on disk of the kv log and of
	// each key's history.
	Retention Retention `yaml:"retention,omitempty"`
}

// Retention is what a site keeps of the kv log and of each key's older
// versions (kv.Retention); zero fields take the defaults.
type Retention struct {
	// LogLag is how many entries of each origin's kv stream the site keeps
	// in its log behind what every site applied. Default 0: the state, not
	// the log, serves reads.
	LogLag int `yaml:"log_lag,omitempty"`
	// MaxLagTime is how long a peer may be disconnected before the log is
	// truncated past what it applied (it then catches up by state
	// transfer). Default 1h; a negative duration (-1s): never, the log
	// grows while a peer is down.
	MaxLagTime time.Duration `yaml:"max_lag_time,omitempty"`
	// KeepVersions is how many versions of each key are kept, counting from
	// the newest, besides those that every site has not applied yet and
	// the newest that they all have. Default 1.
	KeepVersions int `yaml:"keep_versions,omitempty"`
	// KeepAge keeps each key's versions younger than it too, for snapshot
	// reads of the past. Default 0.
	KeepAge time.Duration `yaml:"keep_age,omitempty"`
}

// Files configures file sharing at a site; zero fields take the package's
// defaults (fileshare.Config).
type Files struct {
	// CommitTimeout bounds a commit's wait for stability when the request
	// sets none. Default 1m.
	CommitTimeout time.Duration `yaml:"commit_timeout,omitempty"`
}

// PubSub configures pub/sub at a site; zero fields take the package's
// defaults (pubsub.Config).
type PubSub struct {
	// DuplicateWindow is how long a message id is remembered, so that a
	// retried publish is not published again. Default 2m.
	DuplicateWindow time.Duration `yaml:"duplicate_window,omitempty"`
	// PositionInterval is how often the durable subscriptions' positions
	// are stored while acks change them: what a crash of the site can make
	// them redeliver. Default 20ms.
	PositionInterval time.Duration `yaml:"position_interval,omitempty"`
	// DefaultTimeout bounds a publish's wait when the request sets no
	// deadline. Default 10s.
	DefaultTimeout time.Duration `yaml:"default_timeout,omitempty"`
}

// Lin configures the linearizable mode: keys under Prefix live in one Raft
// group whose voters are Voters.
type Lin struct {
	// Disabled turns the mode off at this site.
	Disabled bool `yaml:"disabled,omitempty"`
	// Prefix of the linearizable keys. Default "/lin/".
	Prefix string `yaml:"prefix,omitempty"`
	// Voters of the Raft group, the same at every site (3 or 5 for a WAN).
	// Default: every site.
	Voters []string `yaml:"voters,omitempty"`
	// Preferred is the site that should lead while healthy. Default none.
	Preferred string `yaml:"preferred,omitempty"`
	// TickInterval is Raft's tick. Default 100ms; elections after 20-40
	// ticks, heartbeats every 2 (set for 100-300 ms round trips).
	TickInterval   time.Duration `yaml:"tick_interval,omitempty"`
	ElectionTicks  int           `yaml:"election_ticks,omitempty"`
	HeartbeatTicks int           `yaml:"heartbeat_ticks,omitempty"`
}

// TLS names certificate files; all three are needed unless Insecure.
type TLS struct {
	Cert string `yaml:"cert,omitempty"`
	Key  string `yaml:"key,omitempty"`
	CA   string `yaml:"ca,omitempty"`
}

// Defaults.
const (
	DefaultCluster       = "stabilizer"
	DefaultWait          = "majority"
	DefaultTimeout       = 10 * time.Second
	DefaultMaxKeyBytes   = 4096
	DefaultMaxValueBytes = 4 << 20
)

// Load reads, defaults and validates a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.dir = filepath.Dir(path)
	return cfg, nil
}

// Parse decodes a config, rejecting unknown fields, applies the defaults and
// validates it.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.KV.DefaultWait == "" {
		c.KV.DefaultWait = DefaultWait
	}
	if c.KV.DefaultTimeout == 0 {
		c.KV.DefaultTimeout = DefaultTimeout
	}
	if c.KV.MaxKeyBytes == 0 {
		c.KV.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.KV.MaxValueBytes == 0 {
		c.KV.MaxValueBytes = DefaultMaxValueBytes
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.Lin.Prefix == "" {
		c.Lin.Prefix = "/lin/"
	}
	if len(c.Lin.Voters) == 0 {
		c.Lin.Voters = c.SiteNames()
	}
}

// Validate reports every bad field, each naming the field and its value.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	names := c.SiteNames()
	if c.Site == "" {
		bad("site", "missing: the name of this site")
	} else if !slices.Contains(names, c.Site) {
		bad("site", "%q is not one of sites (%s)", c.Site, strings.Join(names, ", "))
	}
	if len(c.Sites) == 0 {
		bad("sites", "missing: list every site of the cluster, this one included")
	}
	seen := map[string]bool{}
	for i, s := range c.Sites {
		field := fmt.Sprintf("sites[%d]", i)
		if s.Name == "" {
			bad(field+".name", "missing")
		} else if seen[s.Name] {
			bad(field+".name", "duplicate site %q", s.Name)
		}
		seen[s.Name] = true
		if s.Name == c.Site {
			continue
		}
		for _, a := range []struct{ f, v string }{{"data", s.Data}, {"control", s.Control}, {"client", s.Client}} {
			if err := checkAddr(a.v, false); err != nil {
				bad(field+"."+a.f, "%v", err)
			}
		}
	}
	for _, a := range []struct{ f, v string }{{"data", c.Listen.Data}, {"control", c.Listen.Control}, {"client", c.Listen.Client}, {"http", c.Listen.HTTP}} {
		if err := checkAddr(a.v, true); err != nil {
			bad("listen."+a.f, "%v", err)
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "missing: the folder for this site's database")
	}
	if c.StateTransferRate < 0 {
		bad("state_transfer_rate", "%d is negative (bytes per second; 0 or unset: no bound)", c.StateTransferRate)
	}
	if c.MinFreeBytes < -1 {
		bad("min_free_bytes", "%d is below -1 (-1 turns the disk guard off; 0 or unset is 256 MiB, at most 5%% of the filesystem)", c.MinFreeBytes)
	}
	schema := c.Schema()
	if err := schema.Validate(); err != nil && len(c.Sites) > 0 {
		for _, e := range strings.Split(err.Error(), "\n") {
			errs = append(errs, errors.New(strings.TrimPrefix(strings.TrimPrefix(e, "frontier: "), "schema: ")))
		}
	} else if err == nil {
		for _, name := range sortedKeys(c.Predicates) {
			if _, builtin := frontier.Builtins[name]; builtin {
				bad("predicates."+name, "%q is a built-in predicate and cannot be redefined", name)
				continue
			}
			if _, err := frontier.Compile(c.Predicates[name], schema); err != nil {
				bad("predicates."+name, "%v", err)
			}
		}
		if _, ok := c.Predicates[c.KV.DefaultWait]; !ok {
			if _, err := frontier.Compile(c.KV.DefaultWait, schema); err != nil {
				bad("kv.default_wait", "%q: %v", c.KV.DefaultWait, err)
			}
		}
	}
	if !c.Lin.Disabled {
		for i, v := range c.Lin.Voters {
			if !slices.Contains(names, v) {
				bad(fmt.Sprintf("lin.voters[%d]", i), "unknown site %q (known: %s)", v, strings.Join(names, ", "))
			}
		}
		if c.Lin.Preferred != "" && !slices.Contains(c.Lin.Voters, c.Lin.Preferred) {
			bad("lin.preferred", "%q is not one of lin.voters (%s)", c.Lin.Preferred, strings.Join(c.Lin.Voters, ", "))
		}
		if c.Lin.TickInterval < 0 || c.Lin.ElectionTicks < 0 || c.Lin.HeartbeatTicks < 0 {
			bad("lin", "tick_interval, election_ticks and heartbeat_ticks must not be negative")
		}
	}
	for field, d := range map[string]time.Duration{"pubsub.duplicate_window": c.PubSub.DuplicateWindow,
		"pubsub.position_interval": c.PubSub.PositionInterval, "pubsub.default_timeout": c.PubSub.DefaultTimeout,
		"files.commit_timeout": c.Files.CommitTimeout} {
		if d < 0 {
			bad(field, "%v is negative", d)
		}
	}
	if c.KV.DefaultTimeout < 0 {
		bad("kv.default_timeout", "%v is negative", c.KV.DefaultTimeout)
	}
	if c.KV.MaxKeyBytes < 0 || c.KV.MaxValueBytes < 0 {
		bad("kv", "max_key_bytes %d and max_value_bytes %d must be positive", c.KV.MaxKeyBytes, c.KV.MaxValueBytes)
	}
	if r := c.KV.Retention; r.LogLag < 0 {
		bad("kv.retention.log_lag", "%d is negative", r.LogLag)
	}
	if r := c.KV.Retention; r.KeepVersions < 0 {
		bad("kv.retention.keep_versions", "%d is negative (0 or unset keeps 1)", r.KeepVersions)
	}
	if r := c.KV.Retention; r.KeepAge < 0 {
		bad("kv.retention.keep_age", "%v is negative", r.KeepAge)
	}
	if !c.Insecure && (c.TLS.Cert == "" || c.TLS.Key == "" || c.TLS.CA == "") {
		bad("tls", "cert, key and ca are required unless insecure: true is set (plaintext, for local use only)")
	}
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q is not one of trace, debug, info, warn, error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// checkAddr checks a host:port; a listen address may have port 0 (any
// free port), an address to dial may not.
func checkAddr(a string, listen bool) error {
	if a == "" {
		return errors.New("missing: host:port")
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", a, err)
	}
	n, err := strconv.Atoi(port)
	low := 1
	if listen {
		low = 0
	}
	if err != nil || n < low || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from %d to 65535", a, port, low)
	}
	return nil
}

// LoadTLS reads the tls files and builds the mutual TLS of the site's
// server and of its client side (dialing peers); nil, nil when the site
// runs insecure. Errors name the field and the file.
func (c *Config) LoadTLS() (server, client *tls.Config, err error) {
	if c.Insecure {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.cert %s, tls.key %s: %w", c.TLS.Cert, c.TLS.Key, err)
	}
	caPEM, err := os.ReadFile(c.TLS.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("tls.ca: %s holds no PEM certificate", c.TLS.CA)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// SiteNames returns the cluster's sites in configuration order.
func (c *Config) SiteNames() []string {
	out := make([]string, 0, len(c.Sites))
	for _, s := range c.Sites {
		out = append(out, s.Name)
	}
	return out
}

// Schema is the predicate schema the cluster's predicates compile against.
func (c *Config) Schema() *frontier.Schema {
	return &frontier.Schema{Sites: c.SiteNames(), Groups: c.Groups, Levels: c.Levels}
}

// DataPath is DataDir resolved against the config file's folder.
func (c *Config) DataPath() string {
	if filepath.IsAbs(c.DataDir) || c.dir == "" {
		return c.DataDir
	}
	return filepath.Join(c.dir, c.DataDir)
}

// Peers returns every site but this one.
func (c *Config) Peers() []Site {
	var out []Site
	for _, s := range c.Sites {
		if s.Name != c.Site {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

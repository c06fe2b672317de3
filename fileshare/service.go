package fileshare

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Stream is the name of every site's files transfer, which carries
// chunks: a striped transfer (stabilizer.Node.HandleStriped) of one bulk
// stream per peer of the site, Stream itself (stripe 0, the one stream of
// sites from before stripes) and Stream+"/1", ... (see Storage in the
// package documentation).
const Stream = manifest.Stream

// isStripe reports whether a stream name is one of the files transfer's:
// a files stream.
func isStripe(name string) bool { return manifest.IsStripe(name) }

// MaxChunkBytes is the largest chunk a site accepts.
const MaxChunkBytes = 8 << 20

// Defaults for zero Config fields.
const (
	DefaultTimeout        = time.Minute
	DefaultDefinitionWait = "majority"
	DefaultVisibility     = "majority"
	DefaultKeepVersions   = 10
	DefaultKeepAge        = 30 * 24 * time.Hour
)

// Sentinel errors; returned errors wrap them and name the operand.
var (
	ErrUnknownShare = errors.New("fileshare: unknown share")
	ErrShareExists  = errors.New("fileshare: share exists with another definition")
	ErrBadShare     = errors.New("fileshare: bad share")
	ErrBadChunk     = errors.New("fileshare: bad chunk")
	ErrMissingChunk = errors.New("fileshare: chunk not held")
	ErrChunkGone    = errors.New("fileshare: chunk collected")
	ErrBadVersion   = errors.New("fileshare: bad version")
	ErrClosed       = errors.New("fileshare: service closed")
)

// Config configures a Service.
type Config struct {
	// Node is the site; New registers the files streams' applier, so call
	// New before Node.Start and Start after it. Required.
	Node *stabilizer.Node
	// KV holds share definitions and file versions. Required.
	KV *kv.Store
	// DefinitionWait is what creating a share waits for. Default "majority".
	DefinitionWait string
	// DefaultTimeout bounds a commit's wait for stability when the request
	// sets none. Default 1m: a checkpoint's chunks may still be crossing
	// an ocean.
	DefaultTimeout time.Duration
	// Logger; default none.
	Logger hclog.Logger
	// Registerer for metrics; default none.
	Registerer prometheus.Registerer
	// PruneInterval is how often the shares' history retention
	// (keep_versions, keep_seconds) is applied to the versions this site
	// recorded. Default 1m.
	PruneInterval time.Duration
	// GCInterval is how often the site collects the file chunks no
	// retained version names (Service.GC). Default 1m.
	GCInterval time.Duration
	// GCGrace is how long a chunk no version names is kept, counted from
	// the last collection that found it so with no sign of life (an
	// upload, a lookup, an entry of it arriving) since: clients upload
	// chunks before they commit the versions naming them, and a version
	// committed elsewhere may still be on its way. Default 10m.
	GCGrace time.Duration
	// Now is the clock of version ids, of retention and of the chunk
	// collector's grace period; default time.Now.
	Now func() time.Time
}

// Validate reports every bad field.
func (c *Config) Validate() error {
	var errs []error
	if c.Node == nil {
		errs = append(errs, errors.New("fileshare: config: Node: missing"))
	}
	if c.KV == nil {
		errs = append(errs, errors.New("fileshare: config: KV: missing"))
	}
	if c.PruneInterval < 0 {
		errs = append(errs, fmt.Errorf("fileshare: config: PruneInterval: %v is negative", c.PruneInterval))
	}
	if c.GCInterval < 0 {
		errs = append(errs, fmt.Errorf("fileshare: config: GCInterval: %v is negative", c.GCInterval))
	}
	if c.GCGrace < 0 {
		errs = append(errs, fmt.Errorf("fileshare: config: GCGrace: %v is negative", c.GCGrace))
	}
	if c.DefaultTimeout < 0 {
		errs = append(errs, fmt.Errorf("fileshare: config: DefaultTimeout: %v is negative", c.DefaultTimeout))
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.DefinitionWait == "" {
		c.DefinitionWait = DefaultDefinitionWait
	}
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = DefaultPruneInterval
	}
	if c.GCInterval == 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.GCGrace == 0 {
		c.GCGrace = DefaultGCGrace
	}
}

// Service is the file-sharing application of one site.
type Service struct {
	cfg     Config
	node    *stabilizer.Node
	kv      *kv.Store
	log     hclog.Logger
	chunks  *chunkStore
	metrics *metrics
	// stripes: the names of the files transfer's streams (HandleStriped).
	stripes []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// gcSem admits one collection at a time; gc is its state, touched only
	// by the collection holding gcSem.
	gcSem chan struct{}
	gc    struct {
		// relocTarget: per own files stream, the prefix the last
		// compaction moved chunks out of, until it is dropped.
		relocTarget map[string]uint64
		// answered: chunks sent again for other sites, and when.
		answered map[[32]byte]time.Time
	}

	// lists holds the shares' change logs (changes.go), made on first
	// use.
	lists struct {
		sync.Mutex
		closed bool
		shares map[string]*shareLog
	}

	mu struct {
		sync.Mutex
		closed bool
		last   plan.HLC // of the last version id made here
		gcLast GCStats
	}
}

// New creates the service of a site and registers its applier with the
// node: call it before Node.Start.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	ns, err := cfg.Node.Namespace("fileshare")
	if err != nil {
		return nil, fmt.Errorf("fileshare: %w", err)
	}
	s := &Service{cfg: cfg, node: cfg.Node, kv: cfg.KV, log: cfg.Logger, gcSem: make(chan struct{}, 1)}
	s.gc.answered = map[[32]byte]time.Time{}
	s.gc.relocTarget = map[string]uint64{}
	s.lists.shares = map[string]*shareLog{}
	s.metrics = newMetrics(cfg.Registerer)
	for _, site := range cfg.Node.Schema().Sites {
		// The entry index keys a stripe by origin+"\x00"+stream (entries.go).
		if strings.ContainsRune(site, 0) {
			return nil, fmt.Errorf("fileshare: site %q: a NUL byte in a site's name is not supported", site)
		}
	}
	s.chunks = newChunkStore(ns, cfg.Node, s.metrics, s.log)
	if s.stripes, err = cfg.Node.HandleStriped(Stream, s.chunks); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Start begins the service's background work; the node must be running.
func (s *Service) Start() error {
	for _, fn := range []func(){s.gaugeLoop, s.pruneLoop, s.gcLoop, s.watchVersions} {
		if err := s.goBackground(fn); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the service's goroutines. Call it before closing the node.
// It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	s.lists.Lock()
	s.lists.closed = true
	s.lists.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Service) goBackground(fn func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return nil
}

// nextHLC stamps a version id: the wall clock, made strictly increasing at
// this site, so that ids made here never repeat.
func (s *Service) nextHLC() plan.HLC {
	now := s.cfg.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := plan.HLC{Wall: now}
	if !s.mu.last.Less(h) {
		h = plan.HLC{Wall: s.mu.last.Wall, Logical: s.mu.last.Logical + 1}
	}
	s.mu.last = h
	return h
}

// gaugeLoop refreshes the per-share gauges (versions pending stability,
// conflicts) every few seconds.
func (s *Service) gaugeLoop() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.refreshGauges(s.ctx)
	}
}

package site

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/cmd/internal/buildinfo"
	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
	"github.com/stabilizer/stabilizer/fileshare"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/kv/lin"
	"github.com/stabilizer/stabilizer/pubsub"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/transport"
)

// Site is a running stabilizerd.
type Site struct {
	cfg     *siteconfig.Config
	log     hclog.Logger
	node    *stabilizer.Node
	store   *kv.Store
	grpc    *grpc.Server
	api     *kv.Server
	http    *http.Server
	peers   []*kvclient.Client
	linear  *kv.Linear
	broker  *pubsub.Broker
	files   *fileshare.Service
	reg     *prometheus.Registry
	started time.Time
	// The status page's frontier history, sampled by runSampler until
	// stopSampler is closed (samplerDone then closes).
	console     consoleOptions
	hist        history
	uncovered   *uncovered // when each frontier's first uncovered write was made
	stopSampler chan struct{}
	samplerDone chan struct{}
	stopOnce    sync.Once
}

// Start builds and starts everything the config describes. On error it
// stops what it had started.
func Start(cfg *siteconfig.Config, log hclog.Logger) (*Site, error) {
	return start(cfg, log, consoleOptions{})
}

// start is Start with the status page's sampler tuned (tests).
func start(cfg *siteconfig.Config, log hclog.Logger, co consoleOptions) (_ *Site, err error) {
	co.SampleEvery = cmp.Or(co.SampleEvery, defaultSampleEvery)
	co.StallAfter = cmp.Or(co.StallAfter, defaultStallAfter)
	s := &Site{cfg: cfg, log: log, reg: prometheus.NewRegistry(), started: time.Now(), console: co}
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	peerTLS, clientTLS, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	listen := func(field, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen.%s: %w", field, err)
		}
		closers = append(closers, func() { l.Close() })
		return l, nil
	}
	dataL, err := listen("data", cfg.Listen.Data)
	if err != nil {
		return nil, err
	}
	ctrlL, err := listen("control", cfg.Listen.Control)
	if err != nil {
		return nil, err
	}
	clientL, err := listen("client", cfg.Listen.Client)
	if err != nil {
		return nil, err
	}
	httpL, err := listen("http", cfg.Listen.HTTP)
	if err != nil {
		return nil, err
	}
	peers := map[string]transport.PeerAddr{}
	for _, p := range cfg.Peers() {
		peers[p.Name] = transport.PeerAddr{Data: p.Data, Control: p.Control}
	}
	tcfg := transport.Config{Cluster: cfg.Cluster, Site: cfg.Site, Peers: peers, Listeners: []net.Listener{dataL, ctrlL},
		Insecure: cfg.Insecure, Logger: log.Named("transport"), Registerer: s.reg,
		// Reconnect within a second of a partition healing: a site cut off
		// for longer than the keepalive loses its connections, and the
		// transport's default backoff (up to 5 s) would delay the catch-up.
		BackoffMax: time.Second}
	if peerTLS != nil {
		tcfg.ServerCredentials = credentials.NewTLS(peerTLS.server)
		tcfg.ClientCredentials = credentials.NewTLS(peerTLS.client)
	}
	tr, err := transport.New(tcfg)
	if err != nil {
		return nil, err
	}
	node, err := stabilizer.New(stabilizer.Config{Site: cfg.Site, Schema: cfg.Schema(), Predicates: cfg.Predicates,
		Dir: cfg.DataPath(), Transport: stabilizer.GRPCTransport(tr), Logger: log.Named("node"), Registerer: s.reg,
		TickInterval: time.Millisecond, MinFreeBytes: cfg.MinFreeBytes, StateTransferRate: cfg.StateTransferRate})
	if err != nil {
		tr.Close()
		return nil, err
	}
	s.node = node
	closers = append(closers, func() { node.Close() })
	readers := map[string]kv.Reader{}
	for _, p := range cfg.Peers() {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if clientTLS != nil {
			// Verified against the peer's site name, as the transport does,
			// not against the host dialed (a pod or load balancer name).
			opts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(peerTLS.client)), grpc.WithAuthority(p.Name)}
		}
		c, err := kvclient.Dial(p.Client, opts...)
		if err != nil {
			return nil, err
		}
		s.peers = append(s.peers, c)
		closers = append(closers, func() { c.Close() })
		readers[p.Name] = kv.PeerReader(c.KV)
	}
	ret := cfg.KV.Retention
	s.store, err = kv.New(kv.Config{Node: node, DefaultWait: cfg.KV.DefaultWait, DefaultTimeout: cfg.KV.DefaultTimeout,
		MaxKeyBytes: cfg.KV.MaxKeyBytes, MaxValueBytes: cfg.KV.MaxValueBytes, Peers: readers, Logger: log.Named("kv"),
		Registerer: s.reg, Retention: kv.Retention{LogLag: ret.LogLag, MaxLagTime: ret.MaxLagTime,
			KeepVersions: ret.KeepVersions, KeepAge: ret.KeepAge}})
	if err != nil {
		return nil, err
	}
	s.broker, err = pubsub.New(pubsub.Config{Node: node, KV: s.store, Logger: log.Named("pubsub"), Registerer: s.reg,
		DuplicateWindow: cfg.PubSub.DuplicateWindow, PositionInterval: cfg.PubSub.PositionInterval,
		DefaultTimeout: cfg.PubSub.DefaultTimeout})
	if err != nil {
		return nil, err
	}
	s.files, err = fileshare.New(fileshare.Config{Node: node, KV: s.store, Logger: log.Named("fileshare"), Registerer: s.reg,
		DefaultTimeout: cfg.Files.CommitTimeout})
	if err != nil {
		return nil, err
	}
	linear, err := s.newLinear(node)
	if err != nil {
		return nil, err
	}
	if err := node.Start(); err != nil {
		return nil, err
	}
	// Before the node closes: its truncation and pruning use the node.
	closers = append(closers, func() { s.store.Close() })
	if err := s.store.Start(); err != nil {
		return nil, err
	}
	// Before the node closes: it stores the durable positions.
	closers = append(closers, func() { s.broker.Close() })
	if err := s.broker.Start(); err != nil {
		return nil, err
	}
	closers = append(closers, func() { s.files.Close() })
	if err := s.files.Start(); err != nil {
		return nil, err
	}
	if linear != nil {
		if err := linear.Node.Start(); err != nil {
			return nil, err
		}
		closers = append(closers, func() { linear.Node.Close() })
	}
	s.linear = linear
	s.stopSampler, s.samplerDone = make(chan struct{}), make(chan struct{})
	s.uncovered = &uncovered{node: s.node}
	go s.runSampler(s.stopSampler, s.samplerDone, co.SampleEvery)
	closers = append(closers, s.stopHistory)
	s.serveGRPC(clientL, clientTLS)
	closers = append(closers, s.grpc.Stop)
	s.serveHTTP(httpL)
	log.Info("serving", "site", cfg.Site, "client", clientL.Addr().String(), "http", httpL.Addr().String(),
		"data", dataL.Addr().String(), "control", ctrlL.Addr().String(), "dir", cfg.DataPath())
	return s, nil
}

func (s *Site) serveGRPC(l net.Listener, tlsCfg *tls.Config) {
	reqs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kv_request_duration_seconds",
		Help:    "Client requests by method and predicate, from arrival to answer; outcome is error when the request, or any op of a write_batch, failed.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20)}, []string{"method", "predicate", "outcome"})
	s.reg.MustRegister(reqs)
	srv := kv.NewServer(s.store)
	s.api = srv
	srv.Observe = func(method, pred string, d time.Duration, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		reqs.WithLabelValues(method, predicateLabel(pred), outcome).Observe(d.Seconds())
	}
	limit := max(s.cfg.KV.MaxValueBytes+s.cfg.KV.MaxKeyBytes, pubsub.MaxMessageBytes, fileshare.MaxMessageBytes) + 64<<10
	// Chunks of up to 8 MiB stream to and from clients. gRPC's default
	// 64 KiB stream window made an upload wait for a window update every
	// 64 KiB, a scheduling round trip each on a busy host: uploads into a
	// site ran at ~40 MB/s. Windows and buffers of the chunks' order lift
	// that (measured: a 256 MiB checkpoint prestaged in 2-4 s, not 5-8 s).
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(limit), grpc.ReadBufferSize(256 << 10), grpc.WriteBufferSize(256 << 10),
		grpc.InitialWindowSize(8 << 20), grpc.InitialConnWindowSize(32 << 20)}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	s.grpc = grpc.NewServer(opts...)
	if s.linear != nil {
		srv.EnableLinear(s.linear)
	}
	kvpb.RegisterKVServer(s.grpc, srv)
	kvpb.RegisterAdminServer(s.grpc, srv)
	pubsubpb.RegisterPubSubServer(s.grpc, pubsub.NewServer(s.broker))
	filesharepb.RegisterFileShareServer(s.grpc, fileshare.NewServer(s.files))
	go func() {
		if err := s.grpc.Serve(l); err != nil {
			s.log.Error("client API stopped", "error", err)
		}
	}()
}

// newLinear sets up the linearizable mode on the site's node (lin.Attach).
func (s *Site) newLinear(node *stabilizer.Node) (*kv.Linear, error) {
	c := s.cfg.Lin
	if c.Disabled || !slices.Contains(c.Voters, s.cfg.Site) {
		return nil, nil
	}
	ln, err := lin.Attach(node, lin.Config{Voters: c.Voters, Preferred: c.Preferred, TickInterval: c.TickInterval,
		ElectionTicks: c.ElectionTicks, HeartbeatTicks: c.HeartbeatTicks, MaxValueBytes: s.cfg.KV.MaxValueBytes,
		Logger: s.log.Named("lin")})
	if err != nil {
		return nil, err
	}
	return &kv.Linear{Prefix: c.Prefix, Node: ln, Voters: c.Voters, Preferred: c.Preferred}, nil
}

// predicateLabel keeps the metric's label set small: inline predicates
// share one label.
func predicateLabel(p string) string {
	if len(p) > 40 || strings.ContainsAny(p, "()") {
		return "inline"
	}
	if p == "" {
		return "default"
	}
	return p
}

func (s *Site) serveHTTP(l net.Listener) {
	s.reg.MustRegister(&collector{node: s.node, uncovered: s.uncovered})
	if s.linear != nil {
		s.reg.MustRegister(&linCollector{node: s.linear.Node})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "ok %s up %s\n", s.cfg.Site, time.Since(s.started).Round(time.Second))
	})
	mux.HandleFunc("GET /status.json", s.statusJSON)
	// Profiles for whoever runs the site: it listens where the operator
	// chose, usually loopback.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", s.statusPage)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http stopped", "error", err)
		}
	}()
}

// Shutdown stops taking requests, lets running ones finish until ctx ends,
// then closes the node, which flushes and closes pebble.
func (s *Site) Shutdown(ctx context.Context) error {
	var errs []error
	done := make(chan struct{})
	// Subscriptions end first, storing their durable positions while the
	// node and its peers still answer; their streams then end.
	errs = append(errs, s.broker.Close())
	// Ends the file-share watches, which clients keep open.
	errs = append(errs, s.files.Close())
	go func() {
		// Clients keep their write streams open: ask them to close them,
		// or GracefulStop would wait for them until ctx ends.
		s.api.Drain()
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	errs = append(errs, s.http.Shutdown(ctx))
	s.stopHistory()
	for _, c := range s.peers {
		errs = append(errs, c.Close())
	}
	if s.linear != nil {
		errs = append(errs, s.linear.Node.Close())
	}
	errs = append(errs, s.store.Close())
	errs = append(errs, s.node.Close())
	return errors.Join(errs...)
}

// stopHistory stops the frontier sampler and waits for it; idempotent.
func (s *Site) stopHistory() {
	s.stopOnce.Do(func() { close(s.stopSampler) })
	<-s.samplerDone
}

// Node returns the site's node.
func (s *Site) Node() *stabilizer.Node { return s.node }

// buildInfoGauge is stabilizer_build_info: 1, labelled with the build
// (buildinfo.Read), so that dashboards and alerts can tell which build
// each site runs.
func buildInfoGauge() prometheus.Collector {
	bi := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "stabilizer_build_info",
		Help:        "1, labelled with the site's build: module version, VCS revision and Go toolchain.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}})
	g.Set(1)
	return g
}

type tlsPair struct{ server, client *tls.Config }

// loadTLS builds mutual TLS for peers and the client API from the config's
// files; nil when the site runs insecure.
func loadTLS(cfg *siteconfig.Config) (*tlsPair, *tls.Config, error) {
	server, client, err := cfg.LoadTLS()
	if err != nil || server == nil {
		return nil, nil, err
	}
	return &tlsPair{server: server, client: client}, server, nil
}

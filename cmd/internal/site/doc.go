// Package site runs one stabilizerd site from its configuration file: the
// node, the key/value store, the client gRPC API and the HTTP endpoints
// (metrics, health, a live status page), and shuts them down in order.
//
// The status page at / is the cluster console: every site and the link to
// it (connected, measured round trip, bytes), each stream's frontiers per
// predicate with their lag and a sparkline of the last two minutes
// (history.go samples them once a second), frontiers stalled below their
// head with the acks they wait on, topics with their subscriptions'
// backlogs, shares with versions pending stability, retention and disk
// use. It is one embedded template (console.html) with its CSS inline and
// no external assets; /status.json serves the same view to tools.
//
// The one idea: everything a site serves is built from the config and
// owned by Site, which stops it in reverse order of starting — stop taking
// requests, drain, close the node (flushing pebble) — so a SIGTERM loses
// nothing that was acknowledged.
//
// # Usage
//
//	s, err := site.Start(cfg, logger)
//	...
//	err = s.Shutdown(ctx)
//
// # Concurrency
//
// Start starts the frontier sampler (runSampler), the HTTP and gRPC
// servers; Shutdown stops them, the sampler before the node closes.
// history.mu is a leaf.
package site

// Package site runs one stabilizerd site from its configuration file: the
// node, the key/value store, the client gRPC API and the HTTP endpoints
// (metrics, health, a live status page), and shuts them down in order.
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
package site

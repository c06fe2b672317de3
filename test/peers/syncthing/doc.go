// Package syncthing holds no code: its module pins Syncthing, the peer
// system of the file-sync benchmark, and builds its binary.
//
// github.com/syncthing/syncthing v1.30.0 cannot be installed with
// `go install ...@v1.30.0` because its go.mod has a replace directive
// (github.com/gobwas/glob => github.com/calmh/glob). Replace directives
// apply only in the main module, so this module requires Syncthing (as a
// tool, see go.mod), repeats that replace, and builds cmd/syncthing. The
// noassets tag leaves out the web GUI's assets, which are generated and not
// in the module; the REST API, which the bench uses, is unaffected.
//
// # Usage
//
// From the repository root:
//
//	cd test/peers/syncthing && go build -tags noassets -o ../../../bin/syncthing github.com/syncthing/syncthing/cmd/syncthing
//
// A cold build takes about a minute and a half on two cores. The binary
// reports its version as unknown-dev; add
// -ldflags '-X github.com/syncthing/syncthing/lib/build.Version=v1.30.0'
// to stamp it as the release (v1.30.0 uses the version only to report it
// and to decide on release-candidate upgrades, which STNOUPGRADE turns off).
//
// test/bench/internal/stpeer runs and drives the instances.
package syncthing

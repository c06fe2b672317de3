// Package stpeer runs Syncthing, the peer system of the file-sync
// benchmark, as one instance per site behind the emulated WAN, and drives
// it through its REST API: trigger a scan where a checkpoint was written,
// wait until another site has it on disk, and read the bytes each link
// carried.
//
// # Usage
//
//	c, err := stpeer.Start(ctx, stpeer.Options{
//		Binary: "bin/syncthing", Dir: dir, Sites: topo.Sites, Topology: topo,
//		Bandwidth: 20 * wan.MBPerSecond, Origin: "us-east-1",
//	})
//	defer c.Close()
//	// write files under c.FolderPath("us-east-1"), then
//	start := time.Now()
//	c.Scan(ctx, "us-east-1")
//	at, err := c.WaitInSync(ctx, "eu-west-1", map[string]string{"ckpt.bin": sha256hex})
//	took := at.Sub(start)
//	bytes := c.WireBytes() // per directed link
//
// # How Syncthing is run
//
// Start gives each site a home of its own (Dir/<site>/home, keys made by
// `syncthing generate --home H --no-default-folder --skip-port-probing`),
// then overwrites the config.xml that generate wrote with one of its own
// (config version 37, every element left out takes Syncthing's default):
//
//   - The only listen address is tcp://127.0.0.1:<port> (no QUIC, so no
//     UDP that would bypass the emulated links).
//   - Every other device is listed with one address, tcp://<proxy>, the
//     proxy of the emulated link from this site to that one, which forwards
//     to that device's listen port. Both directions have their proxy, so
//     whichever of the two connections Syncthing keeps between a pair, its
//     bytes cross the pair's emulated links: A->B bytes on the A->B link,
//     B->A bytes on the B->A link, whoever dialed. Start checks this: it
//     waits until every pair is connected and each pair's links carry a
//     connection.
//   - Global and local discovery, relays, NAT traversal, usage reporting
//     (urAccepted -1), crash reporting and automatic upgrades (interval 0,
//     and STNOUPGRADE=1 in the environment) are off: nothing reaches out of
//     the machine, and nothing but the configured addresses is dialed.
//   - startBrowser is false and setLowPriority false: Syncthing by default
//     lowers its own CPU and IO priority, which our system does not do.
//   - The GUI/REST listener is http on 127.0.0.1:<port> with a random API
//     key (sent as X-API-Key); the GUI assets are not built in (-tags
//     noassets), the REST API is.
//   - One folder, "ckpt", at Dir/<site>/folder, shared with every device,
//     fsWatcherEnabled false and rescanIntervalS 86400: files are found by
//     the scans the bench triggers through POST /rest/db/scan right after it
//     writes them (the call returns when the scan is done), so detection
//     delay is not part of what is measured.
//   - With Options.Origin set, the origin's folder is sendonly and every
//     other one receiveonly, as Syncthing's documentation (Folder Types)
//     describes them: send only for the device that keeps the reference
//     copy, whose files are not expected to change elsewhere; receive only
//     for replication mirrors, which apply the cluster's changes and
//     redistribute them to other devices but never send a local change. So
//     no conflict copies can appear, and a site may still pull blocks from
//     another receiver, as it would in production. Without Origin every
//     folder is sendreceive.
//
// Each instance runs as `syncthing serve --home H --no-browser --no-restart
// --gui-address http://127.0.0.1:<port> --logflags 3` with STNOUPGRADE=1.
// serve is Syncthing's monitor process, which starts the syncthing process
// proper and relays its output; --no-restart stops it from restarting that
// process after a crash, so a crash ends the instance instead of hiding in
// a restart. Both are in a process group of their own, which Close signals:
// the monitor passes SIGTERM on and waits for its child, and a SIGKILL
// after the grace period reaches both.
//
// # Measuring completion
//
// WaitInSync long-polls /rest/events?events=ItemFinished at the site (one
// subscription per site, made by Start, so no event is missed between
// calls) and takes a file as complete at the time stamped on the
// ItemFinished event Syncthing logged when it moved the file into place,
// once the file on disk hashes to what the caller wrote. Hashing is done
// after the fact, so it adds nothing to the time; polling noise is absent
// too, since the time comes from Syncthing's own event rather than from
// when a poll noticed. A file that already matches when the wait begins, and
// for which no event arrives, counts as complete without a time.
//
// # Bytes on the wire
//
// WireBytes reads the emulated links' own counters (wan_delivered_bytes_total
// of the cluster's wan.Network), the measure the benchmark uses for our
// system too; it includes TLS and Syncthing's protocol framing. Connections
// gives Syncthing's own per-device totals from /rest/system/connections for
// comparison.
//
// # Concurrency
//
// A Cluster's methods are safe for concurrent use, except that Close must
// not run concurrently with the others; Close is idempotent. Start starts,
// per site, one `syncthing serve` (with the child it starts) and one
// goroutine that waits for it (and, with Options.Log, the goroutine exec
// uses to copy its output); Close stops the processes (SIGTERM, SIGKILL
// after 10 s), waits for them and those goroutines, then closes the wan
// network and its proxies. The per-site event cursor is guarded by the
// site's mutex, which is not held across a request; one WaitInSync at a
// time reads a site's events, a second gets ErrBusy.
package stpeer

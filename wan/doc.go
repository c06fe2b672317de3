// Package wan emulates a wide-area network between named sites in user
// space: directed links with one-way delay, jitter, bandwidth, loss and a
// cut switch, all changeable while traffic flows, built from TCP proxies on
// the loopback interface. It also loads topologies (sites, groups, the
// round-trip matrix) from YAML, with built-in presets of real inter-region
// round trips (ec2-3, ec2-5). Our machines have no netem, so this is how
// tests and the wanbed testbed put an ocean between two processes.
//
// # Usage
//
//	topo, _ := wan.Preset("ec2-3")
//	n, _ := wan.NewNetwork(wan.Config{Topology: topo, Registerer: reg, Logger: log})
//	defer n.Close()
//
//	// A proxy: dial p.Addr() instead of euAddr to reach it from us-east-1.
//	l, _ := n.Link("us-east-1", "eu-west-1")
//	p, _ := l.Proxy(euAddr)
//
//	// Or a dial function for code that takes one and knows nothing of wan,
//	// such as stabilizer/transport's Config.Dialer.
//	n.Register("eu-west-1", euAddr)
//	cfg.Dialer = n.Dialer("us-east-1").DialAddr
//
//	// Or one address for a site's connections from several others, each
//	// told by its source address (etcd members in their own network
//	// namespaces all dial the one peer URL a member advertises).
//	d, _ := n.Demux(wan.DemuxConfig{Listen: "10.77.100.2:2380", To: "eu-west-1", Target: euAddr,
//		Sources: map[string]string{"10.77.0.2": "us-east-1", "10.77.2.2": "ap-northeast-1"}})
//	defer d.Close()
//
//	// Change the WAN while it runs.
//	l.Set(wan.LinkConfig{Delay: 150 * time.Millisecond, Bandwidth: 5 * wan.MBPerSecond})
//	l.Cut()     // us-east-1 -> eu-west-1 passes nothing; the reverse still does
//	l.Restore()
//
// A connection that site A opens to site B travels on the A->B link and its
// replies on the B->A link (Link.Reverse), so cutting one direction is an
// asymmetric partition and cutting both a full one.
//
// # The model
//
// Delay is pipelined: each chunk of bytes read from the sender is due at the
// far side Delay after it was sent, independently of the chunks before it,
// so a 50 ms link carries a continuous stream with 50 ms latency, not 50 ms
// per chunk. Delivery waits for absolute deadlines: a Go timer is asked to
// fire 2 ms early (Go timers wake up to a millisecond late), the rest is a
// nanosleep on Linux and a short yield loop, so crossings do not accumulate
// timer slack. Bytes are dated by the kernel's receive timestamp
// (SO_TIMESTAMPNS) rather than by when the proxy's goroutine got around to
// reading them, so a busy host's scheduling delay before the read is not
// added to the emulated delay either. Measured here: a 50 ms and a 200 ms
// round trip come out 0.1 to 0.3 ms long (loopback and scheduling), see
// TestFidelityRTT. What a user-space emulator cannot remove is the host
// failing to run it on time: on a machine whose CPUs are saturated by other
// processes, individual crossings can be late by milliseconds.
//
// Jitter draws each chunk's delay uniformly from Delay±Jitter. A TCP stream
// is never reordered, so a chunk that draws less waits for the one before;
// on a busy stream the effective delay therefore leans toward Delay+Jitter,
// as it does behind a real jittery path.
//
// Bandwidth is a token bucket per link, shared by every connection through
// it (both those dialed from the link's source and the replies of those
// dialed towards it), as a bottleneck link is. The bucket is kept as a
// virtual clock: each chunk is booked at the link's rate after the bytes
// before it, and the reader sleeps until its chunk has been "sent" before
// reading more, so the sender is pushed back through its own socket
// buffers. Late wake-ups do not lose rate: an idle sender's bucket holds up
// to 5 ms of tokens, and a backlogged sender's bytes (unread bytes were left
// in the socket, so only the proxy was late) continue right after the
// previous ones, up to a second back. Chunks are cut to about 1 ms of the
// link's rate (at least one segment, at most 64 KiB), so a small message
// on another connection waits behind at most about one chunk: like a
// bottleneck with fair queueing or a small buffer, not a bloated FIFO.
// Measured: a 20 MB/s link delivers 19.9 to 20.0 MB/s to a bulk sender, and
// a ping on another connection through the same link meanwhile sees the
// idle round trip plus 0.2 to 0.9 ms (TestFidelityThroughput).
//
// Loss is per TCP segment (1448 bytes): a chunk of k segments loses one
// with probability 1-(1-Loss)^k. TCP hides the loss but pays for it in
// time, so a lost chunk, and everything behind it on its connection (head
// of line blocking), arrives later: one round trip of the path when at
// least three more segments follow in the chunk (fast retransmit on
// duplicate acks), otherwise max(2 round trips, 10 ms) (tail loss probe).
// Congestion control's reaction to loss (a smaller window, so less
// throughput) is not modelled, nor are retransmission timeouts and their
// backoff; the bandwidth limit is the only throughput limit.
//
// A cut link passes nothing and closes nothing. Connections see what a
// partition shows: silence, then whatever timeouts their users set. Bytes
// sent into a cut link, and bytes that were in flight when it was cut, are
// held, up to Config.MaxHeld per connection and direction (after which the
// sender's writes block, as with a full TCP window), and are sent again
// from the Restore at the link's rate, arriving a delay later, in order, as
// TCP's retransmissions would (slow start is not modelled). New dials
// through Link.DialContext wait for the restore (a SYN being retransmitted)
// until their context ends; a raw client of a proxy is accepted by the
// local kernel at once but its bytes are held like any others.
//
// DialContext also costs a round trip before returning, as a TCP handshake
// does. A proxy connects to its target as soon as a client connects; if the
// target refuses, the client is reset one round trip later.
//
// Bytes already inside a link keep the schedule they were given when it
// changes (Set); later bytes follow the new settings and never overtake
// earlier ones of their connection.
//
// # Why not toxiproxy
//
// Shopify's toxiproxy (github.com/Shopify/toxiproxy/v2, v2.5.0 read) is a
// fine fault injector, but it does not meet the fidelity asked of this
// package:
//   - A partition cannot be expressed faithfully. Its timeout toxic drops
//     the bytes it receives, so when it is removed the stream continues
//     with a hole in it (TCP would have retransmitted them), and
//     disabling a proxy closes every connection (an instant error, not
//     silence).
//   - Changing a toxic interrupts the chain, and the latency toxic then
//     forwards what it holds without its delay, so changing a link while
//     traffic flows lets bytes skip the WAN.
//   - Latency is whole milliseconds and each chunk is released by
//     time.After, adding the timer's slack (up to about 1 ms) to every
//     crossing; bandwidth is integer KB/s with a sleep per chunk.
//   - Bandwidth is per connection, not shared by a link, and there is no
//     loss model for TCP streams (no head-of-line cost).
//   - It would bring zerolog, gorilla/mux, urfave/cli and tomb into the
//     module for a few hundred lines of proxy we need to control anyway.
//
// # Concurrency
//
// Network, Link, Proxy and Demux are safe for concurrent use. NewNetwork
// starts nothing. Each Proxy and each Demux owns one accept goroutine and,
// per connection, one goroutine that dials the target and then runs the
// connection's four pipe goroutines (a reader and a writer per direction),
// waiting for them. Proxy.Close, Demux.Close and Network.Close reset the
// connections and wait for all of these. The Network's, Proxies' and Links' mutexes are never held two at a
// time, nor across I/O or a wait, so there is no lock order to keep.
//
// # Metrics
//
// With Config.Registerer set, per directed link {from, to}:
// wan_sent_bytes_total, wan_delivered_bytes_total, wan_lost_segments_total,
// wan_held_bytes, wan_connections, wan_link_cut, wan_link_delay_seconds and
// wan_link_bandwidth_bytes_per_second.
//
// # Topology files
//
// YAML with the fields of the presets (see topologies/ec2-5.yaml):
//
//	name: my-wan
//	source: where the numbers come from
//	sites: [a, b, c]
//	groups: {west: [a, b], east: [c]}
//	rtt_ms:               # each unordered pair once (or both ways, equal)
//	  a: {b: 20, c: 80}
//	  b: {c: 70}
//	bandwidth: 100MB/s    # per link; 0 or absent: unlimited
//	jitter_ms: 0.5
//	loss: 0               # per segment, in [0, 1)
//	links:                # optional per-direction overrides
//	  - {from: a, to: c, delay_ms: 45, bandwidth: 10MB/s}
//
// A one-way delay is half the round trip unless links gives delay_ms for
// that direction. Loading checks every field and reports each problem with
// its path (e.g. rtt_ms.a.d: unknown site "d").
package wan

// Package peerapi is what wanbench and benchpeers exchange: the files
// wanbench writes for benchpeers's commands (an etcd member's config, the
// WAN load of etcd's clients, a NATS server's config file, a pub/sub job)
// and the results benchpeers prints.
//
// The one idea: the peer systems and their clients run in processes of
// their own, started by wanbench; this package is the whole of their
// contract, so that the two sides cannot drift apart.
package peerapi

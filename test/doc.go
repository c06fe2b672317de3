// Package test holds system tests that run the real binaries: stabilizerd
// sites started from genconfig on loopback, driven through kvctl and the Go
// client, killed with SIGKILL and restarted.
//
// The one idea: whatever a test claims about durability it proves against
// real processes and real fsyncs, not against in-process fakes.
package test

package testhelp

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultTimeout bounds Eventually and Context when given no timeout. It is
// generous: a test that reaches it has failed, and on a loaded 2-core CI
// machine a healthy cluster can take seconds to settle.
const DefaultTimeout = 20 * time.Second

// LogLevelEnv names the environment variable that sets Logger's level
// (trace, debug, info, warn, error, off). Default info.
const LogLevelEnv = "STABILIZER_TEST_LOG"

// Logger returns a logger named name whose lines go to t.Log, so that they
// show only when the test fails (or with -v). It stops writing once the
// test and its cleanups are over, so a goroutine that outlives them cannot
// make the test binary panic.
func Logger(t testing.TB, name string) hclog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(w.done)
	level := hclog.Info
	if v := os.Getenv(LogLevelEnv); v != "" {
		level = hclog.LevelFromString(v)
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: w})
}

type tWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tWriter) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// Eventually calls cond until it returns nil, polling with a growing pause
// (1 ms up to 50 ms), and fails the test with cond's last error if that
// takes longer than timeout (DefaultTimeout when 0).
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %v: %v", timeout, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Context returns a context that ends after timeout (DefaultTimeout when
// 0) or when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

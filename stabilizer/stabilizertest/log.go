package stabilizertest

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// DefaultTimeout bounds Eventually and Context when given no timeout.
const DefaultTimeout = testhelp.DefaultTimeout

// Logger returns a logger named name whose lines go to t.Log, at the
// level of the environment variable testhelp.LogLevelEnv (default info).
func Logger(t testing.TB, name string) hclog.Logger { return testhelp.Logger(t, name) }

// Eventually polls cond until it returns nil and fails the test with its
// last error after timeout (DefaultTimeout when 0).
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	testhelp.Eventually(t, timeout, cond)
}

// Context returns a context that ends after timeout (DefaultTimeout when
// 0) or when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	return testhelp.Context(t, timeout)
}

package psload

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a load starts is waited for before it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package pubsub

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// A write refused because the site's disk is full is ResourceExhausted,
// with the message that says where and how full.
func TestToStatusDiskFull(t *testing.T) {
	err := fmt.Errorf("pubsub: publish to %q: stabilizer: append to %q: site eu-west-1: 41.2 MiB free under /data, reserve 256.0 MiB: %w",
		"k", "kv", stabilizer.ErrDiskFull)
	st := status.Convert(toStatus(err))
	if st.Code() != codes.ResourceExhausted || st.Message() != err.Error() {
		t.Fatalf("toStatus(%q) = %v %q, want ResourceExhausted and the message kept", err, st.Code(), st.Message())
	}
}

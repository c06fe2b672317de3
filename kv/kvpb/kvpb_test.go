package kvpb

import "testing"

// TestRegisteredPath guards against a clash with other programs' protos:
// etcd registers a file named plain "kv.proto", and two registrations of
// one path make a binary that links both panic at start.
func TestRegisteredPath(t *testing.T) {
	if got := File_kv_kvpb_kv_proto.Path(); got != "kv/kvpb/kv.proto" {
		t.Fatalf("kv.proto is registered as %q; regenerate with make proto", got)
	}
}

// Package kvpb holds the generated protobuf and gRPC code of the client API
// in kv.proto. Regenerate with `make proto` after changing kv.proto.
package kvpb

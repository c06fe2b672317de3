// Package filesharepb holds the generated protobuf and gRPC code of the
// file-sharing API in fileshare.proto. Regenerate with `make proto` after
// changing fileshare.proto.
package filesharepb

// Package pubsubpb holds the generated protobuf and gRPC code of the pub/sub
// API in pubsub.proto, and the names both ends share (names.go). Regenerate
// with `make proto` after changing pubsub.proto.
package pubsubpb

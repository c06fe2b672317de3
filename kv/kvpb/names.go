package kvpb

// Names that the sites and the clients of this API agree on, beside the
// messages themselves. This file is written by hand; the rest of the
// package is generated from kv.proto.
const (
	// Stream is the name of every site's kv stream; FrontierRequest and
	// the ack tables name it.
	Stream = "kv"
	// LinOrigin is the origin reported for versions of linearizable keys:
	// they belong to the Raft group, not to one site's stream; their seq
	// is the key's version.
	LinOrigin = "raft"
	// WritesBatchHeader is the metadata key by which a Writes client and
	// site say they read messages carrying several writes or answers
	// (WriteRequest.More, WriteReply.More): one gRPC message, and its
	// framing, per batch instead of per write, on both sides.
	WritesBatchHeader = "kv-writes-batch"
)

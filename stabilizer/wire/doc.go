// Package wire encodes the stabilizer core's messages into the bytes that
// travel between sites, and decodes them back.
//
// The one idea: the encoding is a flat sequence of varints and
// length-prefixed byte strings in a fixed field order, behind a format byte,
// so a batch of thousands of entries costs one pass and no reflection, and
// a decoder can reject anything malformed without panicking (see the fuzz
// target).
//
// # Usage
//
//	buf := wire.Append(buf[:0], &msg)
//	msg, err := wire.Decode(buf) // entry payloads alias buf
//
// # Concurrency
//
// Functions are pure. Decode's result shares memory with its input: the
// caller must not reuse the input buffer while the message is in use.
package wire

// Package manifest encodes and decodes the manifest of a file version (a
// filesharepb.Version as the site stores it in the KV) and validates it
// defensively, since versions arrive from other sites.
//
// Decode refuses an oversized encoding (MaxBytes) or one with too many
// chunks or parents (MaxChunks, MaxParents) before proto.Unmarshal
// allocates a message per element, then runs Validate, which names every
// problem it finds (path through safepath.Check, ids and names bounded by
// MaxName, kept heads among the parents, chunk hashes, sizes and
// locations, the size and the content hash against the chunk list, mode,
// commit) in one error wrapping ErrBadManifest. Encode validates too, and
// marshals deterministically, so a version encodes to the same bytes at
// every site running the same build. Unknown fields, from a newer site,
// survive a Decode and Encode.
//
// The content of a version is the SHA-256 over, for each chunk in order,
// its 32-byte hash and its size as 4 bytes big endian: plan.ContentOf.
// This package has its own copy until that lands; TestContentOf pins it.
//
// What Validate cannot know is left to its callers: that the chunks are
// held, that the parents exist, and whether a version is stable (the site
// decides Stable from its own acks; ToPlan copies the field as it is).
//
// # Usage
//
//	b, err := manifest.Encode(v) // the site, recording a version in the KV
//
//	v, err := manifest.Decode(b) // a version from the KV, written anywhere
//	if errors.Is(err, manifest.ErrBadManifest) {
//		// refuse it, and say which site wrote it
//	}
//	pv := manifest.ToPlan(v)        // for the sync decisions
package manifest

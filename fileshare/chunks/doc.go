// Package chunks splits files into content-defined chunks and names each by
// the SHA-256 of its bytes, so that a site stores and sends a chunk once
// however many files and versions hold it.
//
// Cuts depend on the bytes only (a Rabin fingerprint over a 64-byte window,
// github.com/restic/chunker with the fixed Polynomial), never on where a
// read ended, so every client and site cuts the same chunks from the same
// bytes, and an edit changes only the chunks it touches and about one on
// each side. Chunks are MinSize (192 KiB) to MaxSize (8 MiB, what a
// PutChunkRequest carries) bytes, AvgSize (448 KiB) on average; only a
// file's last chunk may be shorter (see Chunk sizes). Memory is one MaxSize
// buffer plus the chunker's 512 KiB read buffer, whatever the file size (a
// test splits 256 MiB allocating 8 MiB in all).
//
// # Usage
//
//	err := chunks.Split(f, func(c chunks.Chunk, data []byte) error {
//		// data is reused after the call: upload or copy it here
//		return upload(ctx, c.Hash, data)
//	})
//
// # Choice of chunker
//
// Chosen with a 512 KiB minimum and a 1 MiB mean; see Chunk sizes for
// why they are smaller now. Measured on 2026-12-02 on this machine (AMD EPYC, family 26 model 2,
// i.e. Zen 5, 2 vCPU at 2.1 GHz, with SHA-NI, AVX2 and AVX-512; other jobs
// were running, so three runs are given as a range), one core
// (GOMAXPROCS=1), 256 MiB of random bytes from memory, min 512 KiB, average
// about 1 MiB, max 8 MiB, in a throwaway module:
//
//	                                     chunk MB/s  chunk+SHA-256 MB/s  mean chunk
//	restic/chunker v0.4.0 (bits 19)      652–719     353–453             1012 KiB
//	jotfs/fastcdc-go v0.2.0              1074–1311   682–800             1214 KiB
//	PlakarKorp/go-cdc-chunkers v1.1.0    1071–1313   480–784             1225 KiB
//	  (fastcdc-v1.0.0)
//	crypto/sha256 alone (SHA-NI)         1412–1581
//
// (github.com/tigerwill90/fastcdc is not served by the module proxy.)
// BenchmarkSplit, chunking and hashing as Split does, gives 350–480 MB/s
// here. Dedup after edits, 64 MiB of random bytes, mean of 32 seeds, as
// the fraction of the edited file's bytes in chunks the original lacks:
//
//	                       10% overwritten in 4 MiB runs   1 KiB inserted
//	restic/chunker         0.141                           0.019
//	jotfs/fastcdc-go       0.181                           0.019
//	go-cdc-chunkers        0.204                           0.020
//
// The ideal for the first is about 0.10 plus one chunk per edited run
// (two runs of 1 MiB chunks in 64 MiB: about 0.13).
//
// restic's chunker it is. FastCDC is about twice as fast at cutting, but
// CPU is not what a checkpoint sync runs short of: 350 MB/s of one core
// chunks and hashes a 10 GB shard in 30 s, faster than the WAN takes it.
// WAN bytes are what it runs short of, and the Rabin chunker sends the
// fewest after an edit (0.141 against 0.181 and 0.204: FastCDC's
// normalized chunking, which makes cut eligibility depend on the distance
// from the chunk start, resynchronizes later after a change). It is also
// the well-kept one: the chunker of restic's repositories for years, with
// cuts unchanged across releases, no dependencies, and a Next that fills a
// buffer the caller owns; go-cdc-chunkers brings blake3 and cpuid into the
// build and registers its algorithms from init, and fastcdc-go is a small
// single-author module. restic's default average (2^20 past MinSize, 1.5
// MiB mean) is lowered to 2^19 (1 MiB mean), which is also faster (545 MB/s
// at 2^20), since the chunker skips the first MinSize bytes of each chunk.
//
// # Chunk sizes
//
// An overwritten run costs, beyond its own bytes, the part of the chunk it
// starts in before it and the bytes after it until the cuts are the
// original's again: about one and a half mean chunks. The file bench
// overwrites 10% of two 128 MiB shards in 4 MiB runs (8 runs) and changes
// 281.6 MiB in all; with a 1 MiB mean its chunks lacked 1.045 × that, and
// the target is bytes on the wire at most 1.02 × Syncthing's (1.008 ×
// the changed bytes), so the chunks may lack about 1.023 ×.
// TestEditOverhead's rounds, and the bench's own two shards (their seeds,
// 2026-12-03), per minimum and mean (MaxSize 8 MiB throughout):
//
//	MinSize  bits  mean      a 4 MiB run costs  the bench's checkpoint lacks
//	512 KiB  19    1 MiB     1.55–1.63 MiB      1.0455 ×
//	256 KiB  18    512 KiB   0.77–0.79 MiB      1.0229 ×
//	256 KiB  17    384 KiB   0.67–0.75 MiB      1.0153 ×
//	192 KiB  18    448 KiB   0.63–0.68 MiB      1.0184 ×   (these)
//	192 KiB  17    320 KiB   0.47 MiB           1.0154 ×
//	128 KiB  17    256 KiB   0.36 MiB           1.0121 ×
//
// (the ranges: 64 and 512 runs on 40 MiB). Halving both (256 KiB, 2^18)
// meets the target with nothing to spare; 192 KiB and 2^18 leave half a
// percent for 14% more chunks than that; a minimum twice the mean distance
// to a cut (256 KiB, 2^17) resynchronizes late after a run and buys little
// for its chunks. Smaller chunks cost per chunk: a location, an index
// record and an entry at each site, and a chunk ref (about 60 bytes) in
// the manifest, whose KV record is bounded by the KV's value limit (4 MiB
// by default: some 70,000 refs, a file of about 30 GiB at this mean). Chunking and hashing run at the same speed within the
// noise (410–580 MB/s on one core here for every row): the chunker hashes
// only past MinSize, half or less of the bytes in each row.
//
// Polynomial, MinSize, MaxSize and the average are part of the format; a
// golden test pins the cuts of one input so that a change to any of them,
// or to the library, is noticed. Changing them makes every file look new
// to deduplication once (stored chunks stay valid).
package chunks

# Stabilizer: the two commands a newcomer needs are `make demo` and `make test`.
GO ?= go
# Binaries name their commit in --version (and a site in stabilizer_build_info):
# -buildvcs=auto stamps it from the checkout even where GOFLAGS turns it off.
BUILDFLAGS ?= -buildvcs=auto
PKGS := ./...

.PHONY: all build image test demo demo-predicates bench bench-pubsub bench-files soak soak-short bench-wipe bench-go scenario console-screenshot lint fuzz proto clean

all: build

# test/bench is a module of its own (the benchmark and the peer systems it
# runs); it is built too, so that it does not rot.
build:
	$(GO) build $(PKGS)
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build ./... && $(GO) build -o ../../bin/ ./cmd/...

# The container image (deploy/Dockerfile; the build context is the root).
image:
	docker build -t stabilizer:dev -f deploy/Dockerfile .

# The full suite, as CI runs it: the lint (gofmt, vet, staticcheck), then
# every test with the expensive invariant checks of the `invariants` build
# tag turned on, then the tests of the benchmark's own module, then those of
# the deployment files (deploy/, a module of its own: Kubernetes, Kustomize
# and compose stay out of the root's go.mod).
test: lint
	$(GO) test -tags invariants -count=1 -timeout 12m $(PKGS)
	cd test/bench && $(GO) test -count=1 ./...
	cd deploy && $(GO) test -count=1 ./...

# The main job: a three-region cluster (ec2-3) over the emulated WAN, writes
# under several predicates, a region cut off and healed, job events, and
# last the training scenario cut short; everything is stopped at the end.
# `make demo-predicates` explains predicates offline.
demo:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	bin/wanbed demo

demo-predicates:
	bash deploy/demo/predicates.sh

# The training platform end to end (about 40 s): a region is lost while its
# trainer writes a checkpoint, the job resumes in another region from the
# newest stable checkpoint; prints the timeline, the figures against their
# bounds and the checks, and fails if a check fails. Its output is kept in
# SCENARIO_OUT (default bin/scenario.txt).
SCENARIO_OUT ?= bin/scenario.txt
scenario:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	bash -o pipefail -c 'bin/wanbed scenario training | tee $(SCENARIO_OUT)'

# A screenshot of the cluster console (a site's status page) over the ec2-3
# emulated WAN with a region cut off, for a person to look at; needs Debian's
# chromium (apt-get install -y chromium). Not part of CI. Writes
# deploy/console/console.png, or CONSOLE_PNG.
CONSOLE_PNG ?= deploy/console/console.png
console-screenshot:
	bash deploy/console/screenshot.sh $(CONSOLE_PNG)

# Issue 7's side-by-side run: our KV per predicate, our Raft mode and etcd on
# the ec2-5 emulated WAN, then loopback throughput against etcd and NATS
# JetStream; about 6 minutes. Results in BENCH_OUT, default bin/bench
# (report.md, results.json, PNG plots). etcd's WAN rows need root for
# their network namespaces and are skipped, saying so, without it.
# The harness (wanbench) and the peers (benchpeers) are built from their
# own module, test/bench, and drive the root's wanbed and stabilizerd.
BENCH_OUT ?= bin/bench
bench:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench kv --topology ec2-5 --out $(BENCH_OUT)

# Issue 16's side-by-side run: our pub/sub against NATS JetStream (R3 across
# the regions, sync_interval: always, its leader in each region in turn) on
# the ec2-3 emulated WAN, a degraded link, loopback throughput and memory
# under a stalled subscriber; under 10 minutes. NATS's WAN rows need root
# (network namespaces). Results in PUBSUB_OUT (report.md, results.json, PNGs).
PUBSUB_OUT ?= bin/bench-pubsub
bench-pubsub:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench pubsub --topology ec2-3 --out $(PUBSUB_OUT)

# Issue 17's side-by-side run: our file sync (stabilizerd sites + stabsync)
# against Syncthing on the ec2-3 emulated WAN, every link at 25MB/s: two
# checkpoint commits (time to stable and to complete against the
# single-path and cooperative bounds, bytes on the wire, CPU per GiB), KV
# put latency while one streams, chunking on one core, peak RSS while a
# 2 GiB file syncs; issue 26's targets. About 10 minutes and up to 40 GB
# of disk writes under FILES_OUT/work (removed at the end). Results in
# FILES_OUT (report.md, results.json, PNGs).
FILES_OUT ?= bin/bench-files
bench-files: bin/syncthing
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench files --topology ec2-3 --out $(FILES_OUT)

# Issue 18's bounded-disk soak: three sites on the ec2-3 emulated WAN (links
# at 25MB/s), 10,000 job-record keys of 1-4 KB overwritten from every site
# at 150 writes/s in all under majority for 30 minutes, then a minute of
# settle: disk per site beside the live data size, against 3x live. Before
# it, a 10-minute small-site phase (the first 4,080 keys only, about
# 10 MiB of live data) on the same fresh sites: disk against 64 MiB + 3x
# live (issue 26); 41 minutes in all. soak-short is the main load for 2
# minutes (20 s of settle), without that phase. Results in SOAK_OUT
# (report.md, results.json, PNG plots).
SOAK_OUT ?= bin/soak
soak:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench soak --topology ec2-3 --out $(SOAK_OUT)

soak-short:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench soak --short --topology ec2-3 --out $(SOAK_OUT)-short

# Issue 18's restore of a wiped site: three sites on the ec2-3 emulated WAN
# (links at 25MB/s) load 1 GiB of KV state (48 KiB checkpoint manifests
# from every site); once every site applied it and truncated its kv logs,
# ap-northeast-1 is killed, its data deleted and started again while 50
# writes/s go on at the others: time until it serves stable reads, against
# 1 GiB / 25MB/s. About 10 minutes and 10 GB of disk writes under
# WIPE_OUT/work (removed at the end). Results in WIPE_OUT (report.md,
# results.json, wipe-transfer.png).
WIPE_OUT ?= bin/bench-wipe
bench-wipe:
	$(GO) build $(BUILDFLAGS) -o bin/ ./cmd/...
	cd test/bench && $(GO) build -o ../../bin/ ./cmd/...
	bin/wanbench wipe --topology ec2-3 --out $(WIPE_OUT)

# Syncthing v1.30.0, the file bench's peer, from its own module (about 1.5
# minutes cold).
bin/syncthing: test/peers/syncthing/go.mod
	cd test/peers/syncthing && $(GO) build -tags noassets -o ../../../bin/syncthing github.com/syncthing/syncthing/cmd/syncthing

# Go benchmarks of every package; BENCH narrows them, e.g. make bench-go BENCH=Eval.
BENCH ?= .
bench-go:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

# gofmt, go vet and staticcheck (pinned in go.mod as a tool) over the root
# and test/bench modules, go vet over deploy's tests; part of make test.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	cd test/bench && $(GO) vet ./... && $(GO) tool staticcheck ./...
	cd deploy && $(GO) vet ./...

# A short fuzzing run of every fuzz target; FUZZTIME to change its length.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./frontier -run '^$$' -fuzz FuzzCompile -fuzztime $(FUZZTIME)
	$(GO) test ./stabilizer/wire -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./pubsub -run '^$$' -fuzz FuzzAudienceFrame -fuzztime $(FUZZTIME)
	$(GO) test ./pubsub -run '^$$' -fuzz FuzzSeenID -fuzztime $(FUZZTIME)
	$(GO) test ./pubsub -run '^$$' -fuzz FuzzFloorRecord -fuzztime $(FUZZTIME)
	$(GO) test ./fileshare/safepath -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME)
	$(GO) test ./fileshare/manifest -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./fileshare -run '^$$' -fuzz FuzzEntryDecoders -fuzztime $(FUZZTIME)

# Needs protoc, protoc-gen-go and protoc-gen-go-grpc on PATH; the generated
# code is committed so nobody else needs them.
# The file is registered under its path from the module root, so that it
# cannot clash with another program's plain "kv.proto" (etcd has one).
proto:
	protoc --proto_path=. --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative kv/kvpb/kv.proto pubsub/pubsubpb/pubsub.proto fileshare/filesharepb/fileshare.proto

clean:
	$(GO) clean -testcache

package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"
)

// streamID names a stream in maps.
type streamID struct{ origin, stream string }

type ackID struct {
	streamID
	level string
}

// Store is one site's pebble database. Its methods are safe for concurrent
// use.
type Store struct {
	db      *pebble.DB
	log     hclog.Logger
	metrics *metrics
	cfg     Config

	// ops counts method calls in progress so that Close can wait for them
	// before closing pebble (which panics on use after close).
	ops sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// failed is set once a commit failed; every later Write returns it.
		failed error
		// durable is what has been fsynced: the state Head, Streams and
		// ReadRange report.
		durable map[streamID]streamState
		acks    map[ackID]uint64
		// queue holds Writes waiting to be committed, in arrival order.
		queue []*writeReq
		// leading is true while some Write goroutine is the commit leader.
		leading bool
		// order counts the groups applied, in WAL order; unsynced holds
		// those no fsync has covered yet, oldest first.
		order    uint64
		unsynced []unsyncedGroup
		// applied is durable plus what unsynced groups add: what
		// ReadApplied may read.
		applied map[streamID]streamState
	}

	// pending is the state as of the last group handed to pebble, ahead of
	// durable by the groups still waiting for their fsync. Only the current
	// commit leader reads or writes it; leadership passes under mu, which
	// orders the accesses.
	pending struct {
		streams map[streamID]streamState
		acks    map[ackID]uint64
	}
}

// Open opens (creating if needed) the store in cfg.Dir and recovers the head,
// truncation point and acks of every stream it holds.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{log: cfg.Logger, metrics: m, cfg: cfg}

	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	fs := cfg.FS
	if fs == nil {
		fs = defaultFS()
	}
	opts := &pebble.Options{
		Cache:        cache,
		FS:           fs,
		MemTableSize: uint64(cfg.MemTableSize),
		// Let a few memtables queue for flushing so that bursts of writes
		// do not stall writers while a flush runs.
		MemTableStopWritesThreshold: DefaultMemTableStopWrites,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{cfg.Logger},
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { cfg.Logger.Error("pebble background error", "error", err) },
			WriteStallBegin: func(i pebble.WriteStallBeginInfo) { cfg.Logger.Warn("write stall", "reason", i.Reason) },
			WriteStallEnd:   func() { cfg.Logger.Info("write stall ended") },
			DiskSlow: func(i pebble.DiskSlowInfo) {
				cfg.Logger.Warn("disk slow", "path", i.Path, "op", i.OpType.String(), "duration", i.Duration)
			},
		},
	}
	// Large payloads go to blob files at flush, so compactions move only
	// references instead of rewriting them.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           4096,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", cfg.Dir, err)
	}
	s.db = db
	if err := s.recover(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(newWALFsync(s)); err != nil {
			return nil, errors.Join(fmt.Errorf("storage: register metrics: %w", err), db.Close())
		}
	}
	s.log.Info("opened", "dir", cfg.Dir, "streams", len(s.mu.durable))
	return s, nil
}

// recover loads the per-stream state and acks; nothing else runs yet.
func (s *Store) recover() error {
	s.mu.durable = make(map[streamID]streamState)
	s.mu.acks = make(map[ackID]uint64)
	err := s.scan([]byte{prefixStream}, []byte{prefixStream + 1}, func(k, v []byte) error {
		origin, stream, rest, ok := decodeStreamKey(k)
		st, ok2 := decodeStreamState(v)
		if !ok || !ok2 || len(rest) != 0 {
			return fmt.Errorf("storage: recover stream state %q: %w", k, ErrCorrupt)
		}
		s.mu.durable[streamID{origin, stream}] = st
		return nil
	})
	if err != nil {
		return err
	}
	err = s.scan([]byte{prefixAck}, []byte{prefixAck + 1}, func(k, v []byte) error {
		origin, stream, level, ok := decodeStreamKey(k)
		if !ok || len(level) == 0 || len(v) != 8 {
			return fmt.Errorf("storage: recover ack %q: %w", k, ErrCorrupt)
		}
		s.mu.acks[ackID{streamID{origin, stream}, string(level)}] = binary.BigEndian.Uint64(v)
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.applied = maps.Clone(s.mu.durable)
	s.pending.streams = maps.Clone(s.mu.durable)
	s.pending.acks = maps.Clone(s.mu.acks)
	return nil
}

// enter registers a method call; false after Close.
func (s *Store) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.ops.Add(1)
	return true
}

// Close waits for method calls in progress, then closes the database. It is
// idempotent; calls after the first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.ops.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	s.log.Info("closed")
	return nil
}

// Head returns the highest seq of stream (origin, stream) that is durable;
// 0 if the store holds nothing of it.
func (s *Store) Head(origin, stream string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.durable[streamID{origin, stream}].head
}

// Ack returns the durable local ack of stream (origin, stream) at level; 0 if
// none was written.
func (s *Store) Ack(origin, stream, level string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.acks[ackID{streamID{origin, stream}, level}]
}

// StreamInfo is the durable state of one stream.
type StreamInfo struct {
	Origin, Stream string
	// Head is the highest seq persisted.
	Head uint64
	// Truncated is the highest seq deleted by Truncate: messages
	// Truncated+1 … Head can be read.
	Truncated uint64
	// Acks holds the local acks written with SetAck, by level.
	Acks map[string]uint64
}

// Streams returns the durable state of every stream the store holds (with
// messages, truncated, or only acks), sorted by origin then stream. After
// Open it is what the site persisted before it stopped.
func (s *Store) Streams() []StreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := make(map[streamID]int)
	var out []StreamInfo
	get := func(id streamID) *StreamInfo {
		i, ok := idx[id]
		if !ok {
			i = len(out)
			idx[id] = i
			out = append(out, StreamInfo{Origin: id.origin, Stream: id.stream})
		}
		return &out[i]
	}
	for id, st := range s.mu.durable {
		si := get(id)
		si.Head, si.Truncated = st.head, st.truncated
	}
	for id, seq := range s.mu.acks {
		si := get(id.streamID)
		if si.Acks == nil {
			si.Acks = make(map[string]uint64)
		}
		si.Acks[id.level] = seq
	}
	slices.SortFunc(out, func(a, b StreamInfo) int {
		if c := strings.Compare(a.Origin, b.Origin); c != 0 {
			return c
		}
		return strings.Compare(a.Stream, b.Stream)
	})
	return out
}

// ReadRange returns messages of stream (origin, stream) from fromSeq on, in
// order and without gaps, as they were appended: at most maxCount messages
// and, past the first, at most maxBytes of payload (zero or negative means no
// limit). It returns only durable messages, so an origin resending from its
// log never sends what could be lost. It returns no messages when fromSeq is
// beyond the head, and ErrTruncated when fromSeq has been truncated.
func (s *Store) ReadRange(origin, stream string, fromSeq uint64, maxCount, maxBytes int) ([]Message, error) {
	return s.readRange(origin, stream, fromSeq, maxCount, maxBytes, false)
}

// ReadApplied is ReadRange up to what is applied, durable or not: it also
// returns messages of WriteAsync batches whose fsync has not completed. It
// is for a caller that, like WriteAsync's, lets nobody hear of what it
// reads before the batches it read are durable.
func (s *Store) ReadApplied(origin, stream string, fromSeq uint64, maxCount, maxBytes int) ([]Message, error) {
	return s.readRange(origin, stream, fromSeq, maxCount, maxBytes, true)
}

func (s *Store) readRange(origin, stream string, fromSeq uint64, maxCount, maxBytes int, applied bool) ([]Message, error) {
	if fromSeq == 0 {
		return nil, fmt.Errorf("storage: read %s/%s: seq 0: %w", origin, stream, ErrInvalid)
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.ops.Done()
	s.mu.Lock()
	st := s.mu.durable[streamID{origin, stream}]
	if applied {
		st = s.mu.applied[streamID{origin, stream}]
	}
	s.mu.Unlock()
	if fromSeq <= st.truncated {
		return nil, fmt.Errorf("storage: read %s/%s from %d: truncated up to %d: %w",
			origin, stream, fromSeq, st.truncated, ErrTruncated)
	}
	if fromSeq > st.head {
		return nil, nil
	}
	to := st.head
	if maxCount > 0 && to-fromSeq >= uint64(maxCount) {
		to = fromSeq + uint64(maxCount) - 1
	}
	// A value is keyed by the seq of its last message, so the first value
	// at or after fromSeq holds fromSeq.
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: msgKey(origin, stream, fromSeq),
		UpperBound: PrefixEnd(streamPrefix(prefixMsg, origin, stream)),
	})
	if err != nil {
		return nil, fmt.Errorf("storage: read %s/%s: %w", origin, stream, err)
	}
	defer it.Close()
	out := make([]Message, 0, min(to-fromSeq+1, 1024))
	bytesRead := 0
	want := fromSeq
	var gap error
	for ok := it.First(); ok && want <= to; ok = it.Next() {
		k := it.Key()
		last := binary.BigEndian.Uint64(k[len(k)-8:])
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("storage: read %s/%s up to seq %d: %w", origin, stream, last, err)
		}
		full := false
		err = decodeMsgs(last, v, func(m Message) bool {
			switch {
			case m.Seq < want:
				return true // before fromSeq, or truncated
			case m.Seq > want:
				gap = fmt.Errorf("storage: read %s/%s: seq %d missing: %w", origin, stream, want, ErrCorrupt)
				if want == fromSeq {
					// A concurrent Truncate removed what we were about to read.
					gap = fmt.Errorf("storage: read %s/%s from %d: %w", origin, stream, fromSeq, ErrTruncated)
				}
				return false
			case maxBytes > 0 && len(out) > 0 && bytesRead+len(m.Payload) > maxBytes:
				full = true
				return false
			}
			m.Payload = bytes.Clone(m.Payload)
			bytesRead += len(m.Payload)
			out = append(out, m)
			want++
			return want <= to
		})
		if err != nil {
			return nil, err
		}
		if gap != nil {
			return nil, gap
		}
		if full {
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("storage: read %s/%s: %w", origin, stream, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("storage: read %s/%s from %d: %w", origin, stream, fromSeq, ErrTruncated)
	}
	return out, nil
}

// GetMeta returns the metadata value of key, or ErrNotFound.
func (s *Store) GetMeta(key string) ([]byte, error) {
	return s.get(metaKey(key), "meta "+key)
}

// AppGet returns the value of key in application namespace ns, or
// ErrNotFound.
func (s *Store) AppGet(ns string, key []byte) ([]byte, error) {
	if err := checkName("namespace", ns); err != nil {
		return nil, err
	}
	return s.get(appKey(ns, key), fmt.Sprintf("app %s key %q", ns, key))
}

// AppScan calls fn for each key k of namespace ns with start <= k < end in
// key order (a nil end means to the end of the namespace) and stops at the
// first error fn returns, which AppScan returns. key and value are valid only
// during the call. The scan sees a consistent snapshot.
func (s *Store) AppScan(ns string, start, end []byte, fn func(key, value []byte) error) error {
	return s.AppScanSkip(ns, start, end, func(k, v []byte) ([]byte, error) { return nil, fn(k, v) })
}

// AppScanSkip is AppScan where fn may skip ahead: when it returns a key
// next (greater than the current key), the scan continues at the first key
// at or after next instead of the following key. It lets a caller read one
// entry of each of many runs of keys without reading the rest of each run.
func (s *Store) AppScanSkip(ns string, start, end []byte, fn func(key, value []byte) (next []byte, err error)) error {
	if err := checkName("namespace", ns); err != nil {
		return err
	}
	p := appPrefix(ns)
	upper := PrefixEnd(p)
	if end != nil {
		upper = appKey(ns, end)
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.ops.Done()
	return s.scanSkip(appKey(ns, start), upper, func(k, v []byte) ([]byte, error) {
		next, err := fn(k[len(p):], v)
		if next != nil {
			next = appKey(ns, next)
		}
		return next, err
	})
}

// AppScanPrefix is AppScan over the keys of ns that start with prefix.
func (s *Store) AppScanPrefix(ns string, prefix []byte, fn func(key, value []byte) error) error {
	var end []byte
	if len(prefix) > 0 {
		end = PrefixEnd(prefix)
		if end == nil { // prefix is all 0xff: scan to the namespace's end
			end = nil
		}
	}
	return s.AppScan(ns, prefix, end, fn)
}

func (s *Store) get(k []byte, what string) ([]byte, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.ops.Done()
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("storage: get %s: %w", what, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get %s: %w", what, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// scan iterates [lower, upper) without registering as an op (callers do).
func (s *Store) scan(lower, upper []byte, fn func(k, v []byte) error) error {
	return s.scanSkip(lower, upper, func(k, v []byte) ([]byte, error) { return nil, fn(k, v) })
}

// scanSkip is scan where fn may name a key to continue from.
func (s *Store) scanSkip(lower, upper []byte, fn func(k, v []byte) ([]byte, error)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("storage: scan: %w", err)
	}
	for ok := it.First(); ok; {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("storage: scan: %w", err), it.Close())
		}
		next, err := fn(it.Key(), v)
		if err != nil {
			// Return the caller's error as is so that it can compare it; a
			// close error after a successful read adds nothing.
			_ = it.Close()
			return err
		}
		if next != nil && bytes.Compare(next, it.Key()) > 0 {
			ok = it.SeekGE(next)
		} else {
			ok = it.Next()
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("storage: scan: %w", err)
	}
	return nil
}

// pebbleLogger sends pebble's logs to hclog. Pebble's Info lines (WAL
// recovery, compactions) are frequent and of interest only when debugging,
// so they go to Debug.
type pebbleLogger struct{ l hclog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.IsDebug() {
		p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by pebble on unrecoverable corruption and must not
// return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal: " + msg)
	panic("storage: pebble fatal: " + msg)
}

// walSyncs returns how many times pebble fsynced its WAL, which shows how
// many Writes each fsync served.
func (s *Store) walSyncs() uint64 {
	var m dto.Metric
	if err := s.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

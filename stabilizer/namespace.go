package stabilizer

import (
	"context"
	"errors"
	"fmt"

	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// ErrNotFound: a namespace holds no such key.
var ErrNotFound = storage.ErrNotFound

// MaxNamespaceLen is the longest namespace name, in bytes.
const MaxNamespaceLen = storage.MaxNameLen

// Namespace is an application's own key space in the site's store: keys
// and values of its choosing, kept apart from every other application's
// and from the library's own state, whatever layout the library uses
// around them. A Batch commits changes to it atomically, together with the
// positions up to which the application applied its streams, so a crash
// never leaves the state ahead of or behind the position the node resumes
// delivery from.
//
// A Namespace is safe for concurrent use. Reads see a consistent snapshot
// and every committed batch, synced or not.
type Namespace struct {
	n    *Node
	name string
}

// Namespace returns the key space of an application, registering name for
// it: each name is handed out once per node, so two applications cannot
// share one by accident. It may be called before or after Start; reads and
// writes work from New on, until Close.
func (n *Node) Namespace(name string) (*Namespace, error) {
	switch {
	case name == "":
		return nil, errors.New("stabilizer: namespace: the name is empty")
	case len(name) > MaxNamespaceLen:
		return nil, fmt.Errorf("stabilizer: namespace %.20q…: the name is %d bytes, longer than %d", name, len(name), MaxNamespaceLen)
	case name == nodeNS:
		return nil, fmt.Errorf("stabilizer: namespace %q: reserved for the library's own state", name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.namespaces[name] {
		return nil, fmt.Errorf("stabilizer: namespace %q: already registered", name)
	}
	n.mu.namespaces[name] = true
	return &Namespace{n: n, name: name}, nil
}

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff): the end of p's keys in a Scan,
// or where a ScanSkip jumps to leave them behind.
func PrefixEnd(p []byte) []byte { return storage.PrefixEnd(p) }

// Name returns the namespace's name.
func (ns *Namespace) Name() string { return ns.name }

// Get returns a copy of the value of key, or an error wrapping ErrNotFound.
func (ns *Namespace) Get(key []byte) ([]byte, error) {
	return ns.n.store.AppGet(ns.name, key)
}

// Scan calls fn for each key k with start <= k < end, in key order (nil
// start: from the first key; nil end: to the last), and stops at the first
// error fn returns, which Scan returns. key and value are valid only during
// the call.
func (ns *Namespace) Scan(start, end []byte, fn func(key, value []byte) error) error {
	return ns.n.store.AppScan(ns.name, start, end, fn)
}

// ScanPrefix is Scan over the keys that start with prefix.
func (ns *Namespace) ScanPrefix(prefix []byte, fn func(key, value []byte) error) error {
	return ns.n.store.AppScanPrefix(ns.name, prefix, fn)
}

// ScanSkip is Scan where fn may skip ahead: when it returns a key next
// greater than the current one, the scan continues at the first key at or
// after next. It reads one key of each of many runs of keys without
// reading the rest of each run.
func (ns *Namespace) ScanSkip(start, end []byte, fn func(key, value []byte) (next []byte, err error)) error {
	return ns.n.store.AppScanSkip(ns.name, start, end, fn)
}

// ScanKeys is ScanSkip without the values: fn sees only the keys, and the
// store never reads a value (pebble loads them lazily; large ones live
// apart from the keys), so a walk over the keys of a namespace of large
// values costs about what the keys do.
func (ns *Namespace) ScanKeys(start, end []byte, fn func(key []byte) (next []byte, err error)) error {
	return ns.n.store.AppScanKeys(ns.name, start, end, fn)
}

// Set sets key to value, durably once it returns nil.
func (ns *Namespace) Set(ctx context.Context, key, value []byte) error {
	b := ns.NewBatch()
	b.Set(key, value)
	return b.Commit(ctx)
}

// Delete deletes key, durably once it returns nil.
func (ns *Namespace) Delete(ctx context.Context, key []byte) error {
	b := ns.NewBatch()
	b.Delete(key)
	return b.Commit(ctx)
}

// NewBatch returns an empty batch of changes to the namespace.
func (ns *Namespace) NewBatch() *Batch { return &Batch{ns: ns} }

// Batch collects changes to one namespace, and the applied positions the
// application reports with them, that Commit makes durable together: after
// a crash either all of them are there or none is. It copies keys at once
// (build each in one reused buffer) and keeps references to values until
// it commits: do not change those before. It is not safe for concurrent
// use.
type Batch struct {
	ns *Namespace
	b  storage.Batch
}

// Set sets key to value.
func (b *Batch) Set(key, value []byte) { b.b.AppSet(b.ns.name, key, value) }

// Delete deletes key.
func (b *Batch) Delete(key []byte) { b.b.AppDelete(b.ns.name, key) }

// DeleteRange deletes the keys k with start <= k < end; a nil end means to
// the namespace's last key.
func (b *Batch) DeleteRange(start, end []byte) { b.b.AppDeleteRange(b.ns.name, start, end) }

// SetApplied records that the application has applied stream up to seq
// with this batch: after a restart the node delivers the stream's entries
// from seq+1 on, so state and position never disagree. seq must not
// exceed what the node delivered. An Applier that records its positions
// this way sees each entry applied exactly once, crashes or not; one that
// does not is redelivered from its last acknowledged `applied` position,
// which may repeat entries it applied just before a crash.
func (b *Batch) SetApplied(stream StreamID, seq uint64) {
	b.b.AppSet(nodeNS, appliedKey(stream), appliedValue(seq))
}

// Empty reports whether the batch holds no changes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Reset empties the batch for reuse.
func (b *Batch) Reset() { b.b.Reset() }

// Commit makes the batch durable: when it returns nil, the changes survive
// a crash. Concurrent commits share fsyncs.
func (b *Batch) Commit(ctx context.Context) error {
	if err := b.ns.n.store.Write(ctx, &b.b); err != nil {
		return fmt.Errorf("stabilizer: namespace %q: commit: %w", b.ns.name, err)
	}
	return nil
}

// CommitNoSync applies the batch at once, readable and ordered before every
// later write, without waiting for an fsync: it becomes durable with the
// next synced write of anyone at the site (the site's log is one
// sequence). An Applier may commit its state this way: the node acks
// `applied` for the entries only in a later synced write, so nothing the
// site acknowledged depends on a batch a crash could take back, and after a
// crash that did take it, the entries are delivered again.
func (b *Batch) CommitNoSync() error {
	if err := b.ns.n.store.WriteNoSync(&b.b); err != nil {
		return fmt.Errorf("stabilizer: namespace %q: commit: %w", b.ns.name, err)
	}
	return nil
}

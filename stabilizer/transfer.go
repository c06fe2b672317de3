package stabilizer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// StateTransfer is what an application implements so that a site lacking
// entries of one of its streams that every holder dropped catches up from a
// peer's copy of the application's state of that stream instead (see
// EnableStateTransfer). The state of one origin's stream must be a set of
// keys of the application's namespace that no other origin's entries
// write: KV versions carry their origin, pub/sub messages theirs.
type StateTransfer interface {
	// Owner names the origin whose stream's entries wrote key (with its
	// value), or false for keys that belong to no one stream (layout
	// markers, derived indexes) and are not transferred.
	Owner(key, value []byte) (origin string, ok bool)
	// Restoring is called before the application's state of stream id is
	// replaced: until Restored, it must not serve what that state would
	// answer (the state is incomplete). Its deliveries stop meanwhile.
	Restoring(id StreamID)
	// Restored is called once the state of id is a peer's copy at the
	// position its entries are delivered again from; an application with
	// state in memory rebuilds it from the namespace here.
	Restored(ctx context.Context, id StreamID) error
}

// transfer is how one stream name's application state moves to a site
// that lacks the log (EnableStateTransfer).
type transfer struct {
	name string
	ns   *Namespace
	app  StateTransfer
}

// EnableStateTransfer lets the streams named stream catch up from a peer's
// snapshot of app's state in ns when the log they need was dropped
// everywhere (Truncate with BeyondPeers), or when this site's store was
// wiped. Call before Start. Without it, truncation never goes past what
// every peer persisted, and a wiped site can only catch up from logs.
func (n *Node) EnableStateTransfer(stream string, ns *Namespace, app StateTransfer) error {
	if ns == nil || app == nil {
		return fmt.Errorf("stabilizer: state transfer of %q: a namespace and an application are required", stream)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.started {
		return fmt.Errorf("stabilizer: state transfer of %q: enable it before Start", stream)
	}
	if _, ok := n.mu.transfer[stream]; ok {
		return fmt.Errorf("stabilizer: state transfer of %q: already enabled", stream)
	}
	n.mu.transfer[stream] = &transfer{name: stream, ns: ns, app: app}
	return nil
}

// transferOf returns the transfer of a stream name, nil when none.
func (n *Node) transferOf(name string) *transfer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.transfer[name]
}

// The defaults of state transfer.
const (
	// DefaultTransferWindow bounds the snapshot bytes a source sends
	// ahead of what the receiver stored: enough for a long round trip at
	// link speed, little enough not to flood the bulk connection.
	DefaultTransferWindow = 16 << 20
	// transferChunk is the payload of one snapshot frame.
	transferChunk = 512 << 10
	// transferIdle: a receiver that heard nothing for this long asks
	// again from where it stands; a source whose receiver went quiet
	// this long stops.
	transferIdle = 20 * time.Second
	// snapshotKeep: a checkpoint no receiver read from for this long is
	// removed.
	snapshotKeep = 10 * time.Minute
)

// snapshotDir is where a source keeps the checkpoints it serves.
func (n *Node) snapshotDir() string { return n.cfg.Dir + ".snapshots" }

// newSnapshotID names a checkpoint.
func newSnapshotID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errUnknownSnapshot: the source no longer has the checkpoint a receiver
// resumes from; the receiver starts over.
var errUnknownSnapshot = errors.New("stabilizer: unknown snapshot")

// transferStats are the node's transfers, for Transfers.
type transferStats struct {
	mu     sync.Mutex
	active map[StreamID]*TransferStatus
}

// TransferStatus describes one state transfer this site receives.
type TransferStatus struct {
	Stream   StreamID
	Source   string
	Snapshot string
	// Position is the snapshot's: the stream continues from Position+1.
	Position uint64
	// Keys and Bytes received so far, of TotalKeys and TotalBytes.
	Keys, TotalKeys   uint64
	Bytes, TotalBytes uint64
	Started           time.Time
	// Waiting says what the transfer waits for, when it does.
	Waiting string
}

// Transfers lists the state transfers this site is receiving.
func (n *Node) Transfers() []TransferStatus {
	n.xfers.mu.Lock()
	defer n.xfers.mu.Unlock()
	out := make([]TransferStatus, 0, len(n.xfers.active))
	for _, t := range n.xfers.active {
		out = append(out, *t)
	}
	return out
}

func (n *Node) setTransfer(st TransferStatus) {
	n.xfers.mu.Lock()
	defer n.xfers.mu.Unlock()
	if n.xfers.active == nil {
		n.xfers.active = map[StreamID]*TransferStatus{}
	}
	n.xfers.active[st.Stream] = &st
}

func (n *Node) endTransfer(id StreamID) {
	n.xfers.mu.Lock()
	defer n.xfers.mu.Unlock()
	delete(n.xfers.active, id)
}

// removeOldSnapshots deletes checkpoints no receiver used for
// snapshotKeep; a source's disk holds no more than what is being served.
func (n *Node) removeOldSnapshots() {
	ents, err := os.ReadDir(n.snapshotDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(n.snapshotDir(), e.Name())
		fi, err := os.Stat(filepath.Join(p, manifestFile))
		if err != nil || time.Since(fi.ModTime()) > snapshotKeep {
			n.log.Info("removing a snapshot no one reads", "snapshot", e.Name())
			_ = os.RemoveAll(p)
		}
	}
}

// openCheckpoint opens a snapshot's checkpoint and marks it used.
func openCheckpoint(dir string) (*storage.Snapshot, error) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(dir, manifestFile), now, now)
	return storage.OpenSnapshot(filepath.Join(dir, "db"))
}

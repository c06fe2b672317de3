package stabilizer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// manifestFile describes a checkpoint: what it holds of which stream.
const manifestFile = "manifest.json"

// manifest is a checkpoint's description, written once it is complete, so
// that a source that restarts serves the same snapshot to a receiver that
// resumes.
type manifest struct {
	Stream     StreamID
	Pos        uint64
	Clock      HLC
	TotalKeys  uint64
	TotalBytes uint64
	Sum        []byte
}

// sources serves snapshots: one sender per (receiver, stream) at a time.
type sources struct {
	mu      sync.Mutex
	serving map[string]*sender
	// making serializes checkpoint creation per stream.
	making sync.Mutex
}

type sender struct {
	req    uint64
	cancel context.CancelFunc
	credit chan uint64
}

func servingKey(peer string, id StreamID) string { return peer + "\x00" + id.String() }

// transferFrame handles a frame of the state transfer channel.
func (n *Node) transferFrame(from string, b []byte) {
	f, err := decodeXfer(b)
	if err != nil {
		n.log.Warn("dropping a state transfer frame", "from", from, "error", err)
		return
	}
	switch f.kind {
	case frameRequest:
		n.startSender(from, f)
	case frameCredit:
		n.src.mu.Lock()
		for _, s := range n.src.serving {
			if s.req == f.req {
				select {
				case s.credit <- f.credit:
				default: // the sender has more than it asked for queued
				}
			}
		}
		n.src.mu.Unlock()
	case frameData, frameError:
		n.recvFrame(from, f)
	}
}

// startSender serves a request, replacing what was served to the same
// receiver for the same stream (the receiver starts over when it asks
// again).
func (n *Node) startSender(peer string, f *xferFrame) {
	ctx, cancel := context.WithCancel(n.ctx)
	s := &sender{req: f.req, cancel: cancel, credit: make(chan uint64, 64)}
	s.credit <- f.credit
	key := servingKey(peer, f.stream)
	n.src.mu.Lock()
	if old := n.src.serving[key]; old != nil {
		old.cancel()
	}
	if n.src.serving == nil {
		n.src.serving = map[string]*sender{}
	}
	n.src.serving[key] = s
	n.src.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer cancel()
		err := n.serve(ctx, peer, f, s)
		if err != nil && ctx.Err() == nil {
			n.log.Warn("state transfer: cannot serve", "to", peer, "stream", f.stream, "error", err)
			ef := &xferFrame{kind: frameError, req: f.req, unknown: errors.Is(err, errUnknownSnapshot), msg: err.Error()}
			_ = n.cfg.Transport.Send(peer, PlaneData, append([]byte{transferChannel}, ef.encode()...))
		}
		n.src.mu.Lock()
		if n.src.serving[key] == s {
			delete(n.src.serving, key)
		}
		n.src.mu.Unlock()
	}()
}

// serve sends the snapshot of f.stream from f.after on, within the credit
// the receiver grants.
func (n *Node) serve(ctx context.Context, peer string, f *xferFrame, s *sender) error {
	tr := n.transferOf(f.stream.Name)
	if tr == nil {
		return fmt.Errorf("stream %s has no state transfer here", f.stream)
	}
	id := f.snapshot
	if id == "" {
		var err error
		if id, err = n.makeSnapshot(ctx, tr, f.stream); err != nil {
			return err
		}
	}
	dir := filepath.Join(n.snapshotDir(), id)
	m, err := readManifest(dir)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", id, errUnknownSnapshot)
	}
	sn, err := openCheckpoint(dir)
	if err != nil {
		return err
	}
	defer sn.Close()
	n.log.Info("state transfer: serving", "to", peer, "stream", f.stream, "snapshot", id, "position", m.Pos,
		"keys", m.TotalKeys, "bytes", m.TotalBytes, "resume", f.after != nil)
	out := &xferFrame{kind: frameData, req: f.req, snapshot: id, pos: m.Pos, clock: m.Clock,
		totalKeys: m.TotalKeys, totalBytes: m.TotalBytes, sum: m.Sum}
	p := pacer{rate: n.cfg.StateTransferRate, start: time.Now()}
	var credit int64
	size := 0
	flush := func(done bool) error {
		out.done = done
		for credit < max(int64(size), 1) {
			select {
			case c := <-s.credit:
				credit += int64(c)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(transferIdle):
				return fmt.Errorf("receiver %s granted no credit for %v", peer, transferIdle)
			}
		}
		frame := append([]byte{transferChannel}, out.encode()...)
		if err := n.cfg.Transport.Send(peer, PlaneBulk, frame); err != nil {
			return err
		}
		credit -= int64(size)
		n.m.transferBytes.WithLabelValues("sent").Add(float64(size))
		p.wait(ctx, size)
		out.pairs, size = out.pairs[:0], 0
		return nil
	}
	err = sn.AppScan(tr.ns.name, f.after, func(k, v []byte) (bool, error) {
		if o, ok := tr.app.Owner(k, v); !ok || o != f.stream.Origin {
			return true, nil
		}
		out.pairs = append(out.pairs, [2][]byte{append([]byte{}, k...), append([]byte{}, v...)})
		size += len(k) + len(v)
		if size >= transferChunk {
			return true, flush(false)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return flush(true)
}

// pacer spreads what a source sends at StateTransferRate, when set.
type pacer struct {
	rate  int64
	start time.Time
	sent  int64
}

func (p *pacer) wait(ctx context.Context, n int) {
	if p.rate <= 0 {
		return
	}
	p.sent += int64(n)
	due := p.start.Add(time.Duration(float64(p.sent) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
}

// makeSnapshot checkpoints the application's namespace with the node's
// positions, at one instant, and describes what it holds of stream id.
func (n *Node) makeSnapshot(ctx context.Context, tr *transfer, id StreamID) (string, error) {
	n.src.making.Lock()
	defer n.src.making.Unlock()
	n.removeOldSnapshots()
	var clock HLC
	if err := n.do(ctx, func() { clock = n.core.Clock() }); err != nil {
		return "", err
	}
	snap := newSnapshotID()
	dir := filepath.Join(n.snapshotDir(), snap)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("state transfer: %w", err)
	}
	if err := n.store.Checkpoint(filepath.Join(dir, "db"), tr.ns.name, nodeNS); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	m, err := describe(dir, tr, id, clock)
	if err == nil {
		err = writeManifest(dir, m)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	n.log.Info("state transfer: snapshot taken", "stream", id, "snapshot", snap, "position", m.Pos, "keys", m.TotalKeys, "bytes", m.TotalBytes)
	return snap, nil
}

// describe reads a checkpoint's position of id and digests what it holds
// of id's state, for the receiver to check.
func describe(dir string, tr *transfer, id StreamID, clock HLC) (manifest, error) {
	sn, err := storage.OpenSnapshot(filepath.Join(dir, "db"))
	if err != nil {
		return manifest{}, err
	}
	defer sn.Close()
	m := manifest{Stream: id, Clock: clock}
	v, err := sn.AppGet(nodeNS, appliedKey(id))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return m, fmt.Errorf("state transfer: this site has not applied %s", id)
	case err != nil:
		return m, err
	case len(v) != 8:
		return m, fmt.Errorf("state transfer: corrupt applied position of %s", id)
	}
	m.Pos = binary.BigEndian.Uint64(v)
	h := sha256.New()
	err = sn.AppScan(tr.ns.name, nil, func(k, v []byte) (bool, error) {
		if o, ok := tr.app.Owner(k, v); ok && o == id.Origin {
			digest(h, k, v)
			m.TotalKeys++
			m.TotalBytes += uint64(len(k) + len(v))
		}
		return true, nil
	})
	m.Sum = h.Sum(nil)
	return m, err
}

// digest adds a key and its value to a snapshot's digest, lengths first so
// that no two sequences of pairs read alike.
func digest(h interface{ Write([]byte) (int, error) }, k, v []byte) {
	var l [2 * binary.MaxVarintLen64]byte
	b := binary.AppendUvarint(l[:0], uint64(len(k)))
	b = binary.AppendUvarint(b, uint64(len(v)))
	_, _ = h.Write(b)
	_, _ = h.Write(k)
	_, _ = h.Write(v)
}

func writeManifest(dir string, m manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, manifestFile))
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

package lin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stabilizer/stabilizer/stabilizer"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The raft state lives in the site's namespace for it:
//
//	"hs"                 hard state (term, vote, commit)
//	"snap"               the latest snapshot (metadata and state machine)
//	"e" index(8 bytes)   log entries, big-endian so they scan in order
//
// A raft.MemoryStorage holds the log from the latest snapshot on: it is
// the raft.Storage raft reads, and it only ever receives what was first
// made durable here.
var (
	keyHardState = []byte("hs")
	keySnapshot  = []byte("snap")
	entryPrefix  = []byte("e")
)

func entryKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), entryPrefix...), index)
}

// initialSnapshot is the state every voter starts from: index 1, term 1,
// the configured voters. Starting from a snapshot rather than from
// configuration-change entries means every site can start on its own,
// with nothing to bootstrap.
func initialSnapshot(voters []uint64) *pb.Snapshot {
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index:     new(uint64(1)),
		Term:      new(uint64(1)),
		ConfState: &pb.ConfState{Voters: voters},
	}}
}

// raftLog persists raft's state to the store.
type raftLog struct {
	ns *stabilizer.Namespace
	// last is the index of the last entry stored (or of the snapshot when
	// none follows it): a range deletion of a conflicting tail is needed
	// only below it, and pebble pays for every range tombstone on reads
	// and flushes.
	last uint64
}

// load reads what was persisted into a fresh MemoryStorage; on first start
// it holds the initial snapshot.
func (l *raftLog) load(voters []uint64) (*raft.MemoryStorage, *pb.Snapshot, error) {
	ms := raft.NewMemoryStorage()
	snap := initialSnapshot(voters)
	hs := &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}
	if b, err := l.ns.Get(keySnapshot); err == nil {
		snap = &pb.Snapshot{}
		if err := proto.Unmarshal(b, snap); err != nil {
			return nil, nil, fmt.Errorf("lin: load snapshot: %w", err)
		}
	} else if !errors.Is(err, stabilizer.ErrNotFound) {
		return nil, nil, fmt.Errorf("lin: load snapshot: %w", err)
	}
	if b, err := l.ns.Get(keyHardState); err == nil {
		hs = &pb.HardState{}
		if err := proto.Unmarshal(b, hs); err != nil {
			return nil, nil, fmt.Errorf("lin: load hard state: %w", err)
		}
	} else if !errors.Is(err, stabilizer.ErrNotFound) {
		return nil, nil, fmt.Errorf("lin: load hard state: %w", err)
	}
	if err := ms.ApplySnapshot(snap); err != nil {
		return nil, nil, fmt.Errorf("lin: load snapshot: %w", err)
	}
	var ents []*pb.Entry
	next := snap.GetMetadata().GetIndex() + 1
	err := l.ns.Scan(entryKey(next), entryKey(1<<64-1), func(_, v []byte) error {
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return err
		}
		if e.GetIndex() != next {
			return fmt.Errorf("entry %d follows %d", e.GetIndex(), next-1)
		}
		next++
		ents = append(ents, e)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("lin: load log: %w", err)
	}
	if err := ms.Append(ents); err != nil {
		return nil, nil, fmt.Errorf("lin: load log: %w", err)
	}
	l.last = next - 1
	if err := ms.SetHardState(hs); err != nil {
		return nil, nil, fmt.Errorf("lin: load hard state: %w", err)
	}
	return ms, snap, nil
}

// save makes a Ready's snapshot, entries and hard state durable, in one
// atomic write.
func (l *raftLog) save(ctx context.Context, snap *pb.Snapshot, ents []*pb.Entry, hs *pb.HardState) error {
	b := l.ns.NewBatch()
	last := l.last
	if !raft.IsEmptySnap(snap) {
		data, err := proto.Marshal(snap)
		if err != nil {
			return err
		}
		b.Set(keySnapshot, data)
		// The snapshot replaces the whole log.
		b.DeleteRange(entryPrefix, entryKey(l.last+1))
		last = snap.GetMetadata().GetIndex()
	}
	if len(ents) > 0 {
		// New entries replace any conflicting tail.
		if first := ents[0].GetIndex(); first <= last {
			b.DeleteRange(entryKey(first), entryKey(last+1))
		}
		last = ents[len(ents)-1].GetIndex()
		for _, e := range ents {
			data, err := proto.Marshal(e)
			if err != nil {
				return err
			}
			b.Set(entryKey(e.GetIndex()), data)
		}
	}
	if !raft.IsEmptyHardState(hs) {
		data, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		b.Set(keyHardState, data)
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(ctx); err != nil {
		return err
	}
	l.last = last
	return nil
}

// compact persists a snapshot made by this site and deletes the entries it
// covers.
func (l *raftLog) compact(ctx context.Context, snap *pb.Snapshot) error {
	data, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	b := l.ns.NewBatch()
	b.Set(keySnapshot, data)
	b.DeleteRange(entryPrefix, entryKey(snap.GetMetadata().GetIndex()+1))
	return b.Commit(ctx)
}

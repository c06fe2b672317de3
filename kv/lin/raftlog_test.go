package lin

import (
	"context"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
	pb "go.etcd.io/raft/v3/raftpb"
)

func ents(term uint64, from, to uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: []byte{byte(i)}})
	}
	return out
}

// TestRaftLogReplacesConflictingTail: entries that overwrite part of the
// stored log remove the rest of the old tail, across reopen, and a
// snapshot removes every entry it covers, whatever the tail held.
func TestRaftLogReplacesConflictingTail(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() (func() error, *raftLog) {
		n, close := stabilizertest.OpenNode(t, "us-east-1", dir)
		ns, err := n.Namespace(DefaultNamespace)
		if err != nil {
			t.Fatal(err)
		}
		return close, &raftLog{ns: ns}
	}
	check := func(l *raftLog, wantFirst, wantLast, wantTerm uint64) {
		t.Helper()
		ms, _, err := l.load([]uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		first, _ := ms.FirstIndex()
		last, _ := ms.LastIndex()
		if first != wantFirst || last != wantLast || l.last != wantLast {
			t.Fatalf("log [%d, %d] (last %d), want [%d, %d]", first, last, l.last, wantFirst, wantLast)
		}
		if term, _ := ms.Term(last); last > 1 && term != wantTerm {
			t.Fatalf("term of %d is %d, want %d", last, term, wantTerm)
		}
	}
	closeLog, l := open()
	check(l, 2, 1, 1) // a new log: the initial snapshot at 1
	if err := l.save(ctx, nil, ents(1, 2, 10), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.save(ctx, nil, ents(1, 11, 12), nil); err != nil { // no conflict: no range deletion needed
		t.Fatal(err)
	}
	if err := l.save(ctx, nil, ents(2, 6, 7), nil); err != nil {
		t.Fatal(err)
	}
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	closeLog, l = open()
	check(l, 2, 7, 2)
	if err := l.save(ctx, nil, ents(2, 8, 9), nil); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	if err := l.save(ctx, snap, ents(3, 21, 22), nil); err != nil {
		t.Fatal(err)
	}
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	_, l = open()
	check(l, 21, 22, 3)
}

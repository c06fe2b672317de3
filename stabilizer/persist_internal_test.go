package stabilizer

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// TestEarlierRecordsAreRewritten: a frontier record in the format of
// earlier releases (parts joined by NUL bytes, a stream name holding NULs
// too) is read and rewritten under today's key at start, and records
// earlier releases kept for inline predicates are deleted.
func TestEarlierRecordsAreRewritten(t *testing.T) {
	dir := t.TempDir()
	schema := &frontier.Schema{Sites: []string{"us-east-1"}}
	id := StreamID{Origin: "us-east-1", Name: "jobs\x00/7"}
	open := func() *Node {
		n, err := New(Config{Site: "us-east-1", Schema: schema, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	v := binary.AppendUvarint(nil, 0) // seq 0: nothing is appended to the stream
	v = binary.AppendUvarint(v, 1)
	v = appendHLC(v, HLC{Wall: 5})
	var b storage.Batch
	legacy := append([]byte{keyFrontierV1}, "us-east-1\x00jobs\x00/7\x00all"...)
	b.AppSet(nodeNS, legacy, v)
	b.AppSet(nodeNS, append([]byte{keyPredicate}, "=min(persisted(sites))"...), append(binary.AppendUvarint(nil, 1), "min(persisted(sites))"...))
	b.AppSet(nodeNS, append([]byte{keyStable}, "=min(persisted(sites))"...), appendHLC(nil, HLC{Wall: 5}))
	if err := n.store.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = open()
	st, err := n.restoreState()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Frontiers) != 1 || st.Frontiers[0].Stream != id || st.Frontiers[0].Predicate != "all" || st.Frontiers[0].HLC.Wall != 5 {
		t.Fatalf("restored frontiers %+v, want all on %s", st.Frontiers, id)
	}
	if len(st.Predicates) != 0 || len(st.StableTimes) != 0 {
		t.Fatalf("restored inline records: %+v %+v", st.Predicates, st.StableTimes)
	}
	var keys []string
	if err := n.store.AppScan(nodeNS, nil, nil, func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != string(frontierKey(id, "all")) {
		t.Fatalf("the node's records after the rewrite: %q, want only %q", keys, frontierKey(id, "all"))
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordNamesRoundTrip: any bytes in a name come back as they went.
func TestRecordNamesRoundTrip(t *testing.T) {
	for _, names := range [][]string{{"a", "b", "c"}, {"", "\x00", "\x00\x00"}, {"us-east-1", "topic/\x00x", "=min(persisted(sites))"}} {
		var k []byte
		for _, s := range names {
			k = appendName(k, s)
		}
		got, ok := readNames(k, len(names))
		if !ok || len(got) != len(names) {
			t.Fatalf("%q: read %q, %v", names, got, ok)
		}
		for i := range names {
			if got[i] != names[i] {
				t.Fatalf("%q: read %q", names, got)
			}
		}
		if _, ok := readNames(k[:len(k)-1], len(names)); ok && len(names[len(names)-1]) > 0 {
			t.Fatalf("%q: a truncated key reads", names)
		}
	}
}

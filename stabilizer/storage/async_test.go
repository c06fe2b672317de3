package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWriteAsyncSynced: the batch is readable through ReadApplied as soon
// as WriteAsync returns, and durable (Head, ReadRange, Ack) once Wait does.
func TestWriteAsyncSynced(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	b.Append("o", "s", msgs("o", "s", 1, 3, 100)...)
	b.SetAck("o", "s", "persisted", 3)
	p, err := s.WriteAsync(&b, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadApplied("o", "s", 1, 0, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("ReadApplied before the fsync: %d messages, %v", len(got), err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if !closed(p.Done()) {
		t.Fatal("Done open after Wait")
	}
	if h, a := s.Head("o", "s"), s.Ack("o", "s", "persisted"); h != 3 || a != 3 {
		t.Fatalf("after Wait: head %d, ack %d; want 3, 3", h, a)
	}
	if got, err := s.ReadRange("o", "s", 1, 0, 0); err != nil || len(got) != 3 {
		t.Fatalf("ReadRange after Wait: %d messages, %v", len(got), err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
}

// TestWriteAsyncUnsynced: a batch applied without an fsync is not durable
// until some later fsync covers it: another synced Write, or Wait asking
// for one.
func TestWriteAsyncUnsynced(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	b.Append("o", "s", msgs("o", "s", 1, 2, 100)...)
	p1, err := s.WriteAsync(&b, false)
	if err != nil {
		t.Fatal(err)
	}
	if closed(p1.Done()) || s.Head("o", "s") != 0 {
		t.Fatalf("durable without an fsync: done %v, head %d", closed(p1.Done()), s.Head("o", "s"))
	}
	if got, err := s.ReadApplied("o", "s", 1, 0, 0); err != nil || len(got) != 2 {
		t.Fatalf("ReadApplied: %d messages, %v", len(got), err)
	}
	if got, err := s.ReadRange("o", "s", 1, 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("ReadRange returned %d undurable messages, %v", len(got), err)
	}
	// Someone else's synced write covers it.
	var other Batch
	other.AppSet("app", []byte("k"), []byte("v"))
	if err := s.Write(context.Background(), &other); err != nil {
		t.Fatal(err)
	}
	if !closed(p1.Done()) || s.Head("o", "s") != 2 {
		t.Fatalf("a later fsync did not cover the batch: done %v, head %d", closed(p1.Done()), s.Head("o", "s"))
	}

	// Wait asks for an fsync when nobody else syncs.
	var b2 Batch
	b2.Append("o", "s", msgs("o", "s", 3, 3, 100)...)
	b2.SetAck("o", "s", "applied", 3)
	p2, err := s.WriteAsync(&b2, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Wait(); err != nil {
		t.Fatal(err)
	}
	if h, a := s.Head("o", "s"), s.Ack("o", "s", "applied"); h != 3 || a != 3 {
		t.Fatalf("after Wait: head %d, ack %d; want 3, 3", h, a)
	}
}

// TestWriteAsyncValidates: a gap is refused at once and writes nothing.
func TestWriteAsyncValidates(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	b.Append("o", "s", msgs("o", "s", 2, 2, 10)...)
	b.AppSet("app", []byte("k"), []byte("v"))
	if _, err := s.WriteAsync(&b, true); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("WriteAsync of a gap: %v, want ErrSeqGap", err)
	}
	if _, err := s.AppGet("app", []byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused batch was written: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteAsync(&Batch{}, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestWriteAsyncAmongWrites: one goroutine appends with WriteAsync,
// deferring every other fsync, while others Write; everything is applied
// in order and ends up durable.
func TestWriteAsyncAmongWrites(t *testing.T) {
	s := openTest(t, t.TempDir())
	const n = 200
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			stream := fmt.Sprintf("w%d", w)
			for seq := uint64(1); seq <= n; seq++ {
				var b Batch
				b.Append("o", stream, msgs("o", stream, seq, seq, 50)...)
				if err := s.Write(context.Background(), &b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last *Pending
	for seq := uint64(1); seq <= n; seq++ {
		var b Batch
		b.Append("o", "async", msgs("o", "async", seq, seq, 50)...)
		b.SetAck("o", "async", "persisted", seq)
		p, err := s.WriteAsync(&b, seq%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	wg.Wait()
	if err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"async", "w0", "w1", "w2", "w3"} {
		got, err := s.ReadRange("o", stream, 1, 0, 0)
		if err != nil || len(got) != n || s.Head("o", stream) != n {
			t.Fatalf("%s: %d messages, head %d, %v", stream, len(got), s.Head("o", stream), err)
		}
	}
	if a := s.Ack("o", "async", "persisted"); a != n {
		t.Fatalf("ack %d, want %d", a, n)
	}
}

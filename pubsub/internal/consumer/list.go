package consumer

import (
	"cmp"
	"slices"
)

// list is a slice kept sorted by seq whose head is cheap to remove: messages
// are mostly offered in order at the tail and acked in order at the head, and
// that pair moves no memory and, once warm, allocates nothing.
type list[T any] struct {
	buf  []T
	head int // buf[:head] is unused
}

// shrinkCap is the capacity above which an emptied list gives its array
// back, so that one burst (many acks above a stuck message) does not pin
// memory for good.
const shrinkCap = 4096

func (l *list[T]) all() []T { return l.buf[l.head:] }

func (l *list[T]) len() int { return len(l.buf) - l.head }

// insert puts v at index i of all().
func (l *list[T]) insert(i int, v T) {
	if len(l.buf) == cap(l.buf) && l.head > 0 {
		n := copy(l.buf, l.buf[l.head:])
		clear(l.buf[n:])
		l.buf, l.head = l.buf[:n], 0
	}
	l.buf = slices.Insert(l.buf, l.head+i, v)
}

// removeAt removes index i of all().
func (l *list[T]) removeAt(i int) {
	if i > 0 {
		l.buf = slices.Delete(l.buf, l.head+i, l.head+i+1)
		return
	}
	l.dropFront(1)
}

// dropFront removes the first n of all().
func (l *list[T]) dropFront(n int) {
	clear(l.buf[l.head : l.head+n])
	l.head += n
	if l.head < len(l.buf) {
		return
	}
	l.head = 0
	if cap(l.buf) > shrinkCap {
		l.buf = nil
		return
	}
	l.buf = l.buf[:0]
}

// entries is a list of entries sorted by seq.
type entries = list[*entry]

func bySeq(e *entry, seq uint64) int { return cmp.Compare(e.seq, seq) }

// find returns the index of seq in l, or where it would go.
func findEntry(l *entries, seq uint64) (int, bool) {
	all := l.all()
	if n := len(all); n == 0 || all[n-1].seq < seq {
		return n, false // the common case: a new message at the tail
	}
	return slices.BinarySearchFunc(all, seq, bySeq)
}

func addEntry(l *entries, e *entry) {
	i, _ := findEntry(l, e.seq)
	l.insert(i, e)
}

func removeEntry(l *entries, e *entry) {
	if all := l.all(); len(all) > 0 && all[0] == e {
		l.removeAt(0) // the common case: the oldest goes first
		return
	}
	if i, ok := findEntry(l, e.seq); ok {
		l.removeAt(i)
	}
}

// seqs is a list of seqs sorted ascending, without duplicates.
type seqs = list[uint64]

func findSeq(l *seqs, seq uint64) (int, bool) {
	all := l.all()
	if n := len(all); n == 0 || all[n-1] < seq {
		return n, false
	}
	return slices.BinarySearch(all, seq)
}

// timers is a min-heap of the entries that wait for a time: in-flight ones
// for their ack deadline, nak'ed ones for their delay to end. Each entry
// knows its index, so that an ack removes it and an in-progress moves it in
// O(log n), and the heap never holds more than the pending messages. Ties
// break by origin and seq, so that the order is deterministic.
type timers []*entry

func (h timers) Len() int { return len(h) }

func (h timers) Less(i, j int) bool {
	a, b := h[i], h[j]
	if c := a.at.Compare(b.at); c != 0 {
		return c < 0
	}
	if a.o != b.o {
		return a.o.name < b.o.name
	}
	return a.seq < b.seq
}

func (h timers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].tidx, h[j].tidx = i, j
}

func (h *timers) Push(x any) {
	e := x.(*entry)
	e.tidx = len(*h)
	*h = append(*h, e)
}

func (h *timers) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.tidx = -1
	return e
}

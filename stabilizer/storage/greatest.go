package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// mergerName is stored in the database: a directory written with another
// merger cannot be opened (pebble refuses it), so the name changes only
// with the merge semantics.
const mergerName = "stabilizer.greatest.v1"

// GreatestValue encodes a value for Batch.AppKeepGreatest: order decides
// which value a key keeps (the greatest, compared as bytes), payload is
// what the application stores beside it.
func GreatestValue(order, payload []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen32+len(order)+len(payload))
	b = binary.AppendUvarint(b, uint64(len(order)))
	b = append(b, order...)
	return append(b, payload...)
}

// SplitGreatest splits a value written by AppKeepGreatest into its order and
// payload.
func SplitGreatest(v []byte) (order, payload []byte, err error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return nil, nil, fmt.Errorf("storage: keep-greatest value of %d bytes has no valid order prefix: %w", len(v), ErrCorrupt)
	}
	return v[w : w+int(n)], v[w+int(n):], nil
}

func greatestOrder(v []byte) ([]byte, error) {
	order, _, err := SplitGreatest(v)
	return order, err
}

// greatestMerger keeps the operand with the greatest order. Operands arrive
// newest or oldest first; neither matters, which is the point: writers
// never read the current value to decide whether theirs wins.
type greatestMerger struct {
	best, order []byte
}

func mergeGreatest(_, value []byte) (pebble.ValueMerger, error) {
	m := &greatestMerger{}
	return m, m.add(value)
}

func (m *greatestMerger) add(v []byte) error {
	order, err := greatestOrder(v)
	if err != nil {
		return err
	}
	if m.best == nil || bytes.Compare(order, m.order) > 0 {
		// pebble reuses the operand's memory after the call.
		m.best = append(m.best[:0], v...)
		m.order, _ = greatestOrder(m.best)
	}
	return nil
}

func (m *greatestMerger) MergeNewer(v []byte) error { return m.add(v) }
func (m *greatestMerger) MergeOlder(v []byte) error { return m.add(v) }

func (m *greatestMerger) Finish(bool) ([]byte, io.Closer, error) { return m.best, nil, nil }

var greatest = &pebble.Merger{Merge: mergeGreatest, Name: mergerName}

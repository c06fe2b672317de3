package lin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Condition is the test of a compare-and-swap. Build one with IfVersion,
// IfAbsent, IfValue or IfLeaseHeld.
type Condition struct {
	kind    condKind
	version uint64
	value   []byte
	job     string
	token   uint64
}

type condKind uint8

const (
	condNone condKind = iota
	condVersion
	condValue
	condLease
)

// IfVersion holds when the key's version is v; IfVersion(0) holds when the
// key does not exist.
func IfVersion(v uint64) Condition { return Condition{kind: condVersion, version: v} }

// IfAbsent holds when the key does not exist.
func IfAbsent() Condition { return IfVersion(0) }

// IfValue holds when the key exists with value v.
func IfValue(v []byte) Condition { return Condition{kind: condValue, value: v} }

// IfLeaseHeld holds while job's lease is held with fencing token token: a
// write fenced by the lease, refused once the lease has moved on.
func IfLeaseHeld(job string, token uint64) Condition {
	return Condition{kind: condLease, job: job, token: token}
}

// String describes the condition for error messages.
func (c Condition) String() string {
	switch c.kind {
	case condVersion:
		if c.version == 0 {
			return "key absent"
		}
		return fmt.Sprintf("version %d", c.version)
	case condValue:
		return "value " + quoteValue(c.value)
	case condLease:
		return fmt.Sprintf("lease %q held with token %d", c.job, c.token)
	}
	return "no condition"
}

type opCode uint8

const (
	opPut opCode = iota + 1
	opDelete
	opGrant
	opRenew
	opRevoke
	opExpire
	opMax
)

var opNames = [...]string{opPut: "put", opDelete: "delete", opGrant: "grant", opRenew: "renew", opRevoke: "revoke", opExpire: "expire"}

func (o opCode) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// command is one entry of the raft log. origin and id name the request at
// the site that proposed it, which waits for its result.
type command struct {
	op     opCode
	origin string
	id     uint64
	key    string // the key, or the job of a lease
	value  []byte
	cond   Condition
	holder string
	ttl    time.Duration
	token  uint64
	rev    uint64 // opExpire: the lease revision found expired
}

const commandFormat = 1

var errCorrupt = errors.New("lin: corrupt command")

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func (c *command) encode() []byte {
	b := make([]byte, 0, 48+len(c.key)+len(c.value)+len(c.cond.value)+len(c.origin)+len(c.holder)+len(c.cond.job))
	b = append(b, commandFormat, byte(c.op), byte(c.cond.kind))
	b = appendBytes(b, []byte(c.origin))
	b = binary.AppendUvarint(b, c.id)
	b = appendBytes(b, []byte(c.key))
	b = appendBytes(b, c.value)
	b = binary.AppendUvarint(b, c.cond.version)
	b = appendBytes(b, c.cond.value)
	b = appendBytes(b, []byte(c.cond.job))
	b = binary.AppendUvarint(b, c.cond.token)
	b = appendBytes(b, []byte(c.holder))
	b = binary.AppendUvarint(b, uint64(c.ttl))
	b = binary.AppendUvarint(b, c.token)
	b = binary.AppendUvarint(b, c.rev)
	return b
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	if n == 0 {
		return nil
	}
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errCorrupt
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func decodeCommand(b []byte) (command, error) {
	d := decoder{b: b}
	var c command
	if f := d.byte(); d.err == nil && f != commandFormat {
		return c, fmt.Errorf("lin: command format %d unknown: %w", f, errCorrupt)
	}
	c.op = opCode(d.byte())
	c.cond.kind = condKind(d.byte())
	c.origin = string(d.bytes())
	c.id = d.uvarint()
	c.key = string(d.bytes())
	c.value = d.bytes()
	c.cond.version = d.uvarint()
	c.cond.value = d.bytes()
	c.cond.job = string(d.bytes())
	c.cond.token = d.uvarint()
	c.holder = string(d.bytes())
	c.ttl = time.Duration(d.uvarint())
	c.token = d.uvarint()
	c.rev = d.uvarint()
	if d.err == nil && (c.op == 0 || c.op >= opMax || c.cond.kind > condLease || len(d.b) != 0) {
		d.err = errCorrupt
	}
	return c, d.err
}

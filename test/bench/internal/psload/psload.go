package psload

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
)

// System is a pub/sub system as the bench drives it: a client in each
// region, each talking to its own region's site (ours) or server (NATS).
// Methods name the client by its region. It must be safe for concurrent use.
type System interface {
	// CreateTopic defines a topic before a load uses it. A system that
	// cannot honour the topic's predicates says so with an error.
	CreateTopic(ctx context.Context, t Topic) error
	// Publish publishes data to topic from region's client and returns once
	// the system acknowledged it: for ours, once the topic's publish-ack
	// predicate holds.
	Publish(ctx context.Context, region, topic string, data []byte) error
	// PublishAsync sends a publish without waiting for its ack. It may
	// block while the client's own window is full.
	PublishAsync(ctx context.Context, region, topic string, data []byte) (Future, error)
	// Subscribe opens the durable subscription named durable on topic at
	// region's site, starting with the messages published from now on (a
	// durable that exists already resumes where it was).
	Subscribe(ctx context.Context, region, topic, durable string) (Subscription, error)
	// Close closes every client.
	Close() error
}

// Topic is a topic's definition. The predicates are ours; a peer accepts
// only what it does (NATS: the empty strings, an R3 stream's quorum).
type Topic struct {
	Name string `json:"name"`
	// PublishAck is when Publish returns: a predicate name or "audience";
	// "" for the system's default (ours: majority).
	PublishAck string `json:"publish_ack,omitempty"`
	// Delivery is what a subscriber's site waits for before it delivers a
	// message; "" means persisted at the subscriber's own site.
	Delivery string `json:"delivery,omitempty"`
}

// Future is an asynchronous publish.
type Future interface {
	// Wait blocks until the publish is acknowledged or failed, or ctx ends.
	Wait(ctx context.Context) error
}

// Subscription is one consumer of a durable subscription.
type Subscription interface {
	// Next blocks for the next delivery.
	Next(ctx context.Context) (Msg, error)
	// Close stops consuming; the durable subscription stays.
	Close() error
}

// Msg is one delivery.
type Msg struct {
	Data []byte
	// Ack acknowledges the delivery. It need not wait for the system.
	Ack func() error
}

// StampBytes is the size of a Stamp at the head of every message.
const StampBytes = 28

var stampMagic = [4]byte{'p', 's', 'b', '1'}

// Stamp is what the head of every message the loads publish says.
type Stamp struct {
	// Run tells this load's messages from those of earlier ones.
	Run uint32
	// Region and Topic index the load's regions and topics.
	Region uint8
	Topic  uint8
	// Warmup marks a message that is not measured.
	Warmup bool
	// Seq numbers the publisher's messages from 0.
	Seq uint64
	// Sent is the wall-clock time the publish began, in Unix nanoseconds.
	Sent int64
}

// Put writes s at the head of buf, which must hold StampBytes.
func (s Stamp) Put(buf []byte) {
	copy(buf, stampMagic[:])
	binary.BigEndian.PutUint32(buf[4:], s.Run)
	buf[8], buf[9] = s.Region, s.Topic
	buf[10], buf[11] = 0, 0
	if s.Warmup {
		buf[10] = 1
	}
	binary.BigEndian.PutUint64(buf[12:], s.Seq)
	binary.BigEndian.PutUint64(buf[20:], uint64(s.Sent))
}

// ErrNoStamp is what ReadStamp returns for a message the loads did not
// publish.
var ErrNoStamp = errors.New("psload: message carries no stamp")

// ReadStamp reads the stamp at the head of data.
func ReadStamp(data []byte) (Stamp, error) {
	if len(data) < StampBytes || [4]byte(data[:4]) != stampMagic {
		return Stamp{}, ErrNoStamp
	}
	return Stamp{
		Run:    binary.BigEndian.Uint32(data[4:]),
		Region: data[8],
		Topic:  data[9],
		Warmup: data[10]&1 != 0,
		Seq:    binary.BigEndian.Uint64(data[12:]),
		Sent:   int64(binary.BigEndian.Uint64(data[20:])),
	}, nil
}

// Sub is a durable subscriber a load opens before it publishes.
type Sub struct {
	Region  string `json:"region"`
	Topic   string `json:"topic"`
	Durable string `json:"durable"`
}

func (s Sub) String() string { return s.Region + "/" + s.Topic + "/" + s.Durable }

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func payload(n int) []byte {
	if n < StampBytes {
		n = StampBytes
	}
	b := make([]byte, n)
	for i := StampBytes; i < n; i++ {
		b[i] = byte('a' + i%26)
	}
	return b
}

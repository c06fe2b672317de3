package consumer

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for zero Config fields; they match the pub/sub API's.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxAckPending = 1000
)

// Config configures a subscription. The zero value of a field means its
// default.
type Config struct {
	// AckWait is how long a delivery waits for its reply before the message
	// is redelivered. Default 30s.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of one message: a message delivered
	// that often whose ack wait passes (or that is nak'ed, or whose consumer
	// detaches) goes to DeadLetters instead of being redelivered. Default 0:
	// unlimited.
	MaxDeliver int
	// MaxAckPending bounds the messages offered and not yet resolved: in
	// flight, waiting to be sent, waiting for redelivery and dead letters
	// waiting for Resolve. It bounds the State's memory whatever the
	// consumers do. Default 1000.
	MaxAckPending int
}

// Validate reports every bad field of c, not only the first.
func (c Config) Validate() error {
	var errs []error
	if c.AckWait < 0 {
		errs = append(errs, fmt.Errorf("consumer: config: AckWait: %v is negative", c.AckWait))
	}
	if c.MaxDeliver < 0 {
		errs = append(errs, fmt.Errorf("consumer: config: MaxDeliver: %d is negative", c.MaxDeliver))
	}
	if c.MaxAckPending < 0 {
		errs = append(errs, fmt.Errorf("consumer: config: MaxAckPending: %d is negative", c.MaxAckPending))
	}
	return errors.Join(errs...)
}

// withDefaults fills in defaults. New has no error to return, so values that
// Validate refuses get the default too.
func (c Config) withDefaults() Config {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver < 0 {
		c.MaxDeliver = 0
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	return c
}

package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The sentinels every error of a site maps to by its gRPC code; match them
// with errors.Is. The *Error that carries one keeps the code and the
// site's message, and status.Code(err) still reads the code.
var (
	// ErrUnknownTopic: the site does not know the topic (NotFound).
	ErrUnknownTopic = errors.New("pubsub: unknown topic")
	// ErrUnknownSubscription: DeleteSubscription found no such durable
	// subscription (NotFound).
	ErrUnknownSubscription = errors.New("pubsub: unknown subscription")
	// ErrTopicExists: CreateTopic met the topic with another definition
	// (AlreadyExists).
	ErrTopicExists = errors.New("pubsub: topic exists with another definition")
	// ErrTooLarge: a message is over its topic's max_message_bytes
	// (ResourceExhausted, or InvalidArgument whose message is about size).
	ErrTooLarge = errors.New("pubsub: message too large")
	// ErrInvalid: the site refused a request as malformed: a bad
	// predicate, name or start position (InvalidArgument).
	ErrInvalid = errors.New("pubsub: invalid request")
	// ErrTimeout: the wait ran out (DeadlineExceeded); for a publish the
	// site's message says how far the acks got. The message may still be
	// published.
	ErrTimeout = errors.New("pubsub: timed out")
	// ErrUnavailable: no site could be reached, or the site was lost and
	// the request could not be retried elsewhere (Unavailable).
	ErrUnavailable = errors.New("pubsub: site unavailable")
	// ErrConflict: the request does not fit the site's state, e.g. a
	// durable subscription in use with other settings (FailedPrecondition,
	// Aborted).
	ErrConflict = errors.New("pubsub: conflict")
	// ErrLimit: a limit of the site other than message size was reached
	// (ResourceExhausted).
	ErrLimit = errors.New("pubsub: limit reached")
	// ErrUnsupported: the site does not implement the request
	// (Unimplemented).
	ErrUnsupported = errors.New("pubsub: not supported by the site")
	// ErrTruncated: retention at the site dropped the messages the
	// subscription was to read next (OutOfRange); the message names the
	// topic, the origin, the seq asked and the first retained one.
	// Subscribe with OnTruncatedFirst to start there instead.
	ErrTruncated = errors.New("pubsub: position dropped by retention")
	// ErrPermission: the site refused the client (PermissionDenied,
	// Unauthenticated).
	ErrPermission = errors.New("pubsub: permission denied")
	// ErrClosed: the Client or the Subscription was closed (Canceled).
	ErrClosed = errors.New("pubsub: closed")
	// ErrAlreadyAcked: Ack, Nak or Term on a message already answered so.
	ErrAlreadyAcked = errors.New("pubsub: message already acked")
)

// Error is a failure the site reported, or the client's own failure with a
// gRPC code. It wraps the sentinel of its code.
type Error struct {
	Op   string     // what failed: `publish to "orders"`
	Code codes.Code // the gRPC code
	Msg  string     // the site's message, unchanged
	Site string     // the address that answered, "" if none did
	kind error      // the sentinel
}

func (e *Error) Error() string { return "pubsub: " + e.Op + ": " + e.Msg }

// Unwrap returns the sentinel of the error's code (nil for codes without
// one, such as Internal).
func (e *Error) Unwrap() error { return e.kind }

// GRPCStatus makes status.Code and status.Convert read the site's code
// and message.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Msg) }

// sentinel is the sentinel for a code and the site's message.
func sentinel(code codes.Code, msg string, notFound error) error {
	switch code {
	case codes.NotFound:
		return notFound
	case codes.AlreadyExists:
		return ErrTopicExists
	case codes.ResourceExhausted:
		if aboutSize(msg) {
			return ErrTooLarge
		}
		return ErrLimit
	case codes.InvalidArgument:
		if aboutSize(msg) {
			return ErrTooLarge
		}
		return ErrInvalid
	case codes.DeadlineExceeded:
		return ErrTimeout
	case codes.Unavailable:
		return ErrUnavailable
	case codes.FailedPrecondition, codes.Aborted:
		return ErrConflict
	case codes.Unimplemented:
		return ErrUnsupported
	case codes.OutOfRange:
		return ErrTruncated
	case codes.PermissionDenied, codes.Unauthenticated:
		return ErrPermission
	case codes.Canceled:
		return ErrClosed
	}
	return nil
}

// aboutSize reports whether a site's message says a message is too large.
func aboutSize(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"too large", "larger than", "max_message_bytes", "message size", "exceeds"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// wrapErr turns what a call returned into the client's error: ctx's own
// error when ctx ended (so errors.Is(err, context.DeadlineExceeded) holds),
// an *Error otherwise.
func wrapErr(ctx context.Context, op, site string, err error) error {
	if err != nil && ctx.Err() != nil {
		var e *Error
		if !errors.As(err, &e) {
			return fmt.Errorf("pubsub: %s: %w", op, ctx.Err())
		}
	}
	return siteErr(op, site, err)
}

// siteErr turns an error of a stream into the client's error.
func siteErr(op, site string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pubsub: %s: %w", op, err)
	}
	st := status.Convert(err)
	return newError(op, site, st.Code(), st.Message(), ErrUnknownTopic)
}

func newError(op, site string, code codes.Code, msg string, notFound error) *Error {
	return &Error{Op: op, Code: code, Msg: msg, Site: site, kind: sentinel(code, msg, notFound)}
}

// errClientClosed is what calls on a closed Client return.
func errClientClosed(op string) error {
	return &Error{Op: op, Code: codes.Canceled, Msg: "client closed", kind: ErrClosed}
}

// lostSite reports whether err means the site is gone (or going), so
// that the client moves to the next address.
func lostSite(err error) bool {
	return status.Code(err) == codes.Unavailable
}

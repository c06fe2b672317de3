package kvclient

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// Client is the Go client of one site's client API. It keeps a session:
// the positions of its own writes, so that its reads at any site see them.
// Its Puts and Deletes share one Writes stream, opened by the first.
type Client struct {
	conn  *grpc.ClientConn
	KV    kvpb.KVClient
	Admin kvpb.AdminClient

	// Unary, set before the first write, makes each Put and Delete its own
	// unary request instead of a write on the client's stream: about twice
	// the CPU per write at both ends, but nothing to set up for a caller
	// that writes once (kvctl).
	Unary bool

	ctx    context.Context // ended by Close; the streams run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the streams' goroutines
	calls  sync.Pool      // *call, answered and free for another write

	stream struct {
		sync.Mutex
		cur    *streamWriter // nil until the first write
		closed bool
	}
	mu struct {
		sync.Mutex
		session map[string]uint64
	}
}

// errClientClosed fails the writes of a closed Client.
var errClientClosed = status.Error(codes.Canceled, "kv: client closed")

// Dial connects to a site's client address. Without options it uses
// plaintext, which sites accept only when configured insecure.
func Dial(addr string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("kv: dial %s: %w", addr, err)
	}
	c := &Client{conn: conn, KV: kvpb.NewKVClient(conn), Admin: kvpb.NewAdminClient(conn)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.session = map[string]uint64{}
	return c, nil
}

// Close ends the requests in flight (writes on the stream fail with
// codes.Canceled), waits for the stream's goroutines and closes the
// connection.
func (c *Client) Close() error {
	c.stream.Lock()
	c.stream.closed = true
	c.stream.Unlock()
	c.cancel()
	c.wg.Wait()
	return c.conn.Close()
}

// Put writes key = value, waiting for the predicate wait ("" for the site's
// default, "none" for no wait) up to timeout (0: the site's default), and
// records the write in the session.
//
// It is a write on the client's stream, which many goroutines share: each
// call gets its own answer, as soon as its wait holds. When ctx ends
// first, Put returns at once, and the write may still be made, as a unary
// request in flight may be. When the wait fails the write was made: the
// response says where, beside the error. ctx's deadline does not travel
// with the write; timeout does. Writes larger than 64 KiB go as unary
// requests, as do all with Unary.
func (c *Client) Put(ctx context.Context, key string, value []byte, wait string, timeout time.Duration) (*kvpb.WriteResponse, error) {
	return c.write(ctx, key, value, false, wait, timeout)
}

// Delete removes key, waiting like Put.
func (c *Client) Delete(ctx context.Context, key, wait string, timeout time.Duration) (*kvpb.WriteResponse, error) {
	return c.write(ctx, key, nil, true, wait, timeout)
}

// streamMaxBytes is the largest write (key, value and wait) that goes on
// the stream: a site refuses messages larger than its value limit plus
// 64 KiB, which would end the stream for every write on it, and a large
// write would hold up the small ones behind it, while its own request's
// cost is small beside its size.
const streamMaxBytes = 64 << 10

func (c *Client) write(ctx context.Context, key string, value []byte, del bool, wait string, timeout time.Duration) (*kvpb.WriteResponse, error) {
	// A string that is not UTF-8 cannot be encoded: the unary request
	// fails alone, where the stream would break for every write on it.
	if c.Unary || len(key)+len(value)+len(wait) > streamMaxBytes || !utf8.ValidString(key) || !utf8.ValidString(wait) {
		return c.writeUnary(ctx, key, value, del, wait, timeout)
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	cl, _ := c.calls.Get().(*call)
	if cl == nil {
		cl = &call{done: make(chan struct{}, 1)}
	}
	cl.req.Key, cl.req.Value, cl.req.Delete, cl.req.Wait, cl.req.TimeoutMs = key, value, del, wait, timeout.Milliseconds()
	var w *streamWriter
	for attempt := 1; ; attempt++ {
		var err error
		if w, err = c.writer(); err != nil {
			return nil, err
		}
		// A stream that broke or was asked to close since writer looked
		// refuses the write; the next call to writer replaces it.
		if err = w.enqueue(cl); err == nil {
			break
		}
		if attempt == 3 {
			return nil, err
		}
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		if w.abandon(cl) {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		// Answered meanwhile.
	}
	if cl.err != nil {
		// The sender may still be sending it: not for reuse.
		return nil, cl.err
	}
	r := cl.reply
	// The site answered, so the call was sent, and nothing else holds it.
	*cl = call{done: cl.done}
	c.calls.Put(cl)
	c.remember(r.Write)
	if r.Code != 0 {
		return r.Write, status.Error(codes.Code(r.Code), r.Error)
	}
	if r.Write == nil {
		return nil, status.Errorf(codes.Internal, "kv: write %q answered without a result", key)
	}
	return r.Write, nil
}

// writer returns the client's stream, opening one if there is none or the
// last broke or was asked to close.
func (c *Client) writer() (*streamWriter, error) {
	c.stream.Lock()
	defer c.stream.Unlock()
	if c.stream.closed {
		return nil, errClientClosed
	}
	if w := c.stream.cur; w != nil && !w.retired.Load() {
		return w, nil
	}
	w := newStreamWriter(c)
	c.stream.cur = w
	// Close waits for this only after it set closed, under the lock.
	c.wg.Go(w.run)
	return w, nil
}

// Queued returns how many writes wait in the client for its stream's
// sender: a gauge of how far the client's writers are ahead of the site.
func (c *Client) Queued() int {
	c.stream.Lock()
	w := c.stream.cur
	c.stream.Unlock()
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.queue)
}

// writeUnary sends one Put or Delete request.
func (c *Client) writeUnary(ctx context.Context, key string, value []byte, del bool, wait string, timeout time.Duration) (*kvpb.WriteResponse, error) {
	var r *kvpb.WriteResponse
	var err error
	if del {
		r, err = c.KV.Delete(ctx, &kvpb.DeleteRequest{Key: key, Wait: wait, TimeoutMs: timeout.Milliseconds()})
	} else {
		r, err = c.KV.Put(ctx, &kvpb.PutRequest{Key: key, Value: value, Wait: wait, TimeoutMs: timeout.Milliseconds()})
	}
	c.remember(r)
	return r, err
}

// remember records a write in the session even when its wait failed: the
// write happened, and reads must see it.
func (c *Client) remember(r *kvpb.WriteResponse) {
	if r == nil || r.Seq == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.session[r.Origin] = max(c.mu.session[r.Origin], r.Seq)
}

// Get reads a key with the session's positions attached.
func (c *Client) Get(ctx context.Context, r *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if r.Session == nil {
		r.Session = c.Session()
	}
	return c.KV.Get(ctx, r)
}

// Session returns a copy of the session's positions.
func (c *Client) Session() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.mu.session)
}

// FormatSession renders positions as a token, "site:seq,site:seq".
func FormatSession(s map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, k+":"+strconv.FormatUint(s[k], 10))
	}
	return strings.Join(parts, ",")
}

// ParseSession reads a token made by FormatSession.
func ParseSession(tok string) (map[string]uint64, error) {
	out := map[string]uint64{}
	if tok == "" {
		return out, nil
	}
	for _, p := range strings.Split(tok, ",") {
		site, seq, ok := strings.Cut(p, ":")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || site == "" || err != nil {
			return nil, fmt.Errorf("kv: session %q: %q is not site:seq", tok, p)
		}
		out[site] = max(out[site], n)
	}
	return out, nil
}

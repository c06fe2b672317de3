package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// DefaultEndpoint is where kvctl looks for a site without --endpoint or
// STABILIZER_ENDPOINT.
const DefaultEndpoint = "127.0.0.1:7003"

// remote holds what commands that talk to a site share.
type remote struct {
	g                 *globals
	endpoint          string
	timeout           time.Duration
	caFile, cert, key string
}

// dialOptions are plaintext unless --cacert is given: then TLS, with a
// client certificate when --cert and --key are given too (sites that are
// not insecure require one).
func (r *remote) dialOptions() ([]grpc.DialOption, error) {
	if r.caFile == "" {
		if r.cert != "" || r.key != "" {
			return nil, usageError{errors.New("--cert and --key need --cacert")}
		}
		return nil, nil
	}
	pem, err := os.ReadFile(r.caFile)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cacert: %s holds no PEM certificate", r.caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if r.cert != "" || r.key != "" {
		c, err := tls.LoadX509KeyPair(r.cert, r.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, nil
}

func (r *remote) client() (*kvclient.Client, error) {
	opts, err := r.dialOptions()
	if err != nil {
		return nil, err
	}
	if err := r.pickEndpoint(); err != nil {
		return nil, err
	}
	c, err := kvclient.Dial(r.endpoint, opts...)
	if err != nil {
		return nil, err
	}
	// One write per run: a stream would only add its setup.
	c.Unary = true
	return c, nil
}

func (r *remote) dial() (*kvclient.Client, context.Context, context.CancelFunc, error) {
	c, err := r.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+2*time.Second)
	return c, ctx, cancel, nil
}

// explain turns a gRPC error into a message a person can act on.
func (r *remote) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if e := r.explainRaw(st); e != nil {
		return e
	}
	switch st.Code() {
	case codes.Unavailable:
		if strings.HasPrefix(st.Message(), "kv: quorum not reached") {
			// The site answered: it is up; the sites it asked are not all.
			return fmt.Errorf("%s\nthe site at %s is up but could not hear from enough sites for --quorum: the failed ones are named above "+
				"(down or cut off); a read without --quorum, or with --stable, is answered by this site alone", st.Message(), r.endpoint)
		}
		if strings.HasPrefix(st.Message(), "kv: ") {
			return fmt.Errorf("the site at %s answered: %s", r.endpoint, st.Message())
		}
		if strings.Contains(st.Message(), "error reading server preface") && answersHTTP(r.endpoint) {
			return fmt.Errorf("%s answers HTTP/1.1, not gRPC: is it a site's http port (listen.http)? --endpoint takes its client port (listen.client)", r.endpoint)
		}
		if e := r.explainTLS(st.Message()); e != nil {
			return e
		}
		if strings.Contains(st.Message(), "connection refused") || strings.Contains(st.Message(), "dial") || strings.Contains(st.Message(), "connection error") {
			return fmt.Errorf("cannot reach a site at %s: is stabilizerd running there? (set --endpoint or STABILIZER_ENDPOINT)", r.endpoint)
		}
	case codes.DeadlineExceeded:
		if st.Message() == "context deadline exceeded" {
			return fmt.Errorf("no answer from %s within %s (--timeout)", r.endpoint, r.timeout)
		}
	case codes.ResourceExhausted:
		if strings.Contains(st.Message(), "disk full") {
			return fmt.Errorf("%s\nthe site at %s is out of disk space: it takes writes again by itself once space is freed "+
				"under its data directory; reads there still work, and writes at other sites are taken", st.Message(), r.endpoint)
		}
	}
	return errors.New(st.Message())
}

// explainRaw translates what gRPC itself says about a request it could not
// carry (rather than the site's own answers) into what the user gave and
// what to do.
func (r *remote) explainRaw(st *status.Status) error {
	msg := st.Message()
	switch {
	case strings.Contains(msg, "string field contains invalid UTF-8"):
		return errors.New("a key or name given is not valid UTF-8: keys, topics and predicates are UTF-8 text " +
			"(encode binary identifiers, e.g. in hex); values may be any bytes")
	case strings.Contains(msg, "message larger than max"):
		var got, limit int
		if i := strings.Index(msg, "max ("); i >= 0 {
			_, _ = fmt.Sscanf(msg[i:], "max (%d vs. %d)", &got, &limit)
		}
		return fmt.Errorf("the request is %d bytes, over the %d bytes a site takes in one message: a value may hold at most "+
			"the site's kv.max_value_bytes (default 4 MiB); keep large data in a file share (stabsync) and its path in the KV", got, limit)
	case strings.Contains(msg, "produced zero addresses") || strings.Contains(msg, "no such host"):
		return fmt.Errorf("cannot resolve the host of --endpoint %s: check the name, or give an IP address", r.endpoint)
	}
	return nil
}

// pickEndpoint chooses, of a comma-separated --endpoint, the first site
// that accepts a connection, so that a KV command fails over to the next
// site when one is down, as the pub/sub commands do. A single endpoint is
// used as given. r.endpoint then names the site chosen, which errors name.
func (r *remote) pickEndpoint() error {
	if !strings.Contains(r.endpoint, ",") {
		return nil
	}
	addrs := r.addrs()
	if len(addrs) == 0 {
		return usageError{fmt.Errorf("--endpoint %q names no address", r.endpoint)}
	}
	var tried []string
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, min(r.timeout, 2*time.Second))
		if err == nil {
			c.Close()
			r.endpoint = a
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", a, err))
	}
	return fmt.Errorf("cannot reach any site of --endpoint: is stabilizerd running there? %s", strings.Join(tried, "; "))
}

// answersHTTP reports whether addr answers a plain HTTP/1.0 request as an
// HTTP server that is not TLS, as a site's http port does. It is asked
// only once a call failed, so that kvctl pointed at the wrong port says
// which port it is rather than suspecting TLS.
func answersHTTP(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 512)
	n, _ := io.ReadAtLeast(c, buf, len("HTTP/1.x"))
	reply := string(buf[:n])
	return strings.HasPrefix(reply, "HTTP/1.") && !strings.Contains(reply, "HTTPS")
}

// explainTLS names a TLS mismatch between kvctl and the site, which gRPC
// reports as the site being unavailable.
func (r *remote) explainTLS(msg string) error {
	tlsFlags := "--cacert, --cert and --key"
	switch {
	case r.caFile == "" && strings.Contains(msg, "error reading server preface"):
		return fmt.Errorf("the site at %s does not answer plaintext: it may require TLS (give %s)", r.endpoint, tlsFlags)
	case r.caFile != "" && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Errorf("the site at %s does not speak TLS: drop %s, or configure tls on the site", r.endpoint, tlsFlags)
	case r.caFile != "" && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")):
		// Under TLS 1.3 a server that rejects the client's certificate
		// says so only after the handshake, often by closing the connection.
		return fmt.Errorf("the site at %s closed the connection after the TLS handshake: "+
			"is --cert signed by the CA the site trusts (its tls.ca)?", r.endpoint)
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:"):
		i := strings.Index(msg, "tls:")
		if j := strings.Index(msg, "x509:"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		return fmt.Errorf("TLS with the site at %s failed: %s (check %s against the site's tls settings)",
			r.endpoint, strings.TrimRight(msg[i:], `"`), tlsFlags)
	}
	return nil
}

func addRemote(root *cobra.Command, g *globals) *remote {
	r := &remote{g: g}
	ep := os.Getenv("STABILIZER_ENDPOINT")
	if ep == "" {
		ep = DefaultEndpoint
	}
	root.PersistentFlags().StringVar(&r.endpoint, "endpoint", ep, "client address of a site, or several comma-separated to fail over (default from STABILIZER_ENDPOINT)")
	root.PersistentFlags().DurationVar(&r.timeout, "timeout", 10*time.Second, "how long to wait for the site and for predicates")
	root.PersistentFlags().StringVar(&r.caFile, "cacert", "", "CA certificate (PEM) of the sites: use TLS")
	root.PersistentFlags().StringVar(&r.cert, "cert", "", "client certificate (PEM), with --key, for sites that require one")
	root.PersistentFlags().StringVar(&r.key, "key", "", "client key (PEM)")
	return r
}

// versionJSON is a version as scripts read it.
type versionJSON struct {
	Key         string   `json:"key"`
	Value       string   `json:"value"`
	ValueBase64 []byte   `json:"value_base64,omitempty"`
	Deleted     bool     `json:"deleted,omitempty"`
	Origin      string   `json:"origin"`
	Seq         uint64   `json:"seq"`
	HLC         hlcJSON  `json:"hlc"`
	Snapshot    *hlcJSON `json:"snapshot,omitempty"`
	Answered    []string `json:"answered,omitempty"`
}

type hlcJSON struct {
	Wall    int64  `json:"wall"`
	Logical uint32 `json:"logical"`
}

func hlcOf(h *kvpb.HLC) hlcJSON {
	if h == nil {
		return hlcJSON{}
	}
	return hlcJSON{h.Wall, h.Logical}
}

func (h hlcJSON) String() string {
	if h.Wall == 0 {
		return "-"
	}
	return time.Unix(0, h.Wall).UTC().Format("2006-01-02T15:04:05.000000Z") + fmt.Sprintf("+%d", h.Logical)
}

func toJSON(v *kvpb.Version) versionJSON {
	out := versionJSON{Key: v.Key, Deleted: v.Deleted, Origin: v.Origin, Seq: v.Seq, HLC: hlcOf(v.Hlc)}
	if utf8.Valid(v.Value) {
		out.Value = string(v.Value)
	} else {
		out.ValueBase64 = v.Value
	}
	return out
}

// text is how text and table output show a value: itself, or, for bytes
// that are not UTF-8 (which a terminal garbles and which would otherwise
// print as an empty line), what they are and how to get them.
func (v versionJSON) text() string {
	if v.ValueBase64 != nil {
		return fmt.Sprintf("<%d bytes, not UTF-8: `kvctl get KEY > FILE` writes them, -o json gives value_base64>", len(v.ValueBase64))
	}
	return v.Value
}

// printVersions writes versions in format. A single version's text output
// (bare, as get prints it) is the value itself, followed by a newline; a
// value that is not UTF-8 is written as its exact bytes with no newline,
// so that `kvctl get KEY > FILE` gives back what `kvctl put KEY - < FILE`
// wrote.
func printVersions(w io.Writer, format string, vs []versionJSON, bare bool) error {
	switch format {
	case "json":
		if bare && len(vs) == 1 {
			return writeJSON(w, vs[0])
		}
		if vs == nil {
			vs = []versionJSON{}
		}
		return writeJSON(w, vs)
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tVALUE\tORIGIN\tSEQ\tHLC")
		for _, v := range vs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", v.Key, shorten(v.text(), 60), v.Origin, v.Seq, v.HLC)
		}
		return tw.Flush()
	}
	for _, v := range vs {
		var err error
		switch {
		case bare && v.ValueBase64 != nil:
			_, err = w.Write(v.ValueBase64)
		case bare:
			_, err = fmt.Fprintln(w, v.Value)
		default:
			_, err = fmt.Fprintf(w, "%s\t%s\n", v.Key, v.text())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func newKVCmds(g *globals, r *remote) []*cobra.Command {
	var wait, session string
	put := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Write a key, waiting until a predicate covers the write",
		Long: `Write KEY = VALUE at the site and wait until the predicate --wait covers the write:
a name (none, local, majority, all, one_remote, or one the cluster configured) or an inline
predicate. Exit status 0 means the predicate holds for the write. VALUE "-" reads stdin.`,
		Example: `  kvctl put jobs/7 '{"state":"running"}' --wait majority
  kvctl put ckpt/job7/latest step-1200 --wait 'min(persisted(origin), max(persisted(others())))' -o json
  kvctl put big - < manifest.json`,
		Args: exactArgs("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := []byte(args[1])
			if args[1] == "-" {
				var err error
				if value, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			c, ctx, done, err := r.open("text", "json", "table")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Put(ctx, args[0], value, wait, r.timeout)
			if err != nil {
				return r.explain(err)
			}
			return printWrite(cmd.OutOrStdout(), g.output, args[0], wait, res, c)
		},
	}
	put.Flags().StringVar(&wait, "wait", "", "predicate the write waits for (default: the site's default_wait)")
	del := &cobra.Command{
		Use:     "del KEY",
		Short:   "Delete a key, waiting like put",
		Example: `  kvctl del jobs/7 --wait all`,
		Args:    exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := r.open("text", "json", "table")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Delete(ctx, args[0], wait, r.timeout)
			if err != nil {
				return r.explain(err)
			}
			return printWrite(cmd.OutOrStdout(), g.output, args[0], wait, res, c)
		},
	}
	del.Flags().StringVar(&wait, "wait", "", "predicate the deletion waits for")
	var stable, quorum, snapshot string
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Read a key: latest, stable under a predicate, from a quorum, or from a snapshot",
		Long: `Read KEY at the site. Without flags: the site's latest state.
  --stable P    the newest version that is stable under P (survives what P protects against)
  --quorum P    ask every site; done when the answers satisfy the dual of P: sees every write acknowledged under P
  --snapshot P  a consistent snapshot at P's global stable time
A value that is not UTF-8 is written as its exact bytes, with no newline, so that
kvctl get KEY > FILE gives back what kvctl put KEY - < FILE wrote (-o json carries it as
value_base64; scan and -o table show its size instead). A missing key exits with status 1.`,
		Example: `  kvctl get jobs/7
  kvctl get ckpt/job7/latest --stable majority -o json
  kvctl get jobs/7 --quorum majority --endpoint 127.0.0.1:7103
  kvctl get jobs/7 --session us-east-1:42   # read your own write made at another site`,
		Args: exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, err := kvclient.ParseSession(session)
			if err != nil {
				return usageError{err}
			}
			c, ctx, done, err := r.open("text", "json", "table")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.Get(ctx, &kvpb.GetRequest{Key: args[0], Stable: stable, Quorum: quorum, Snapshot: snapshot,
				Session: sess, TimeoutMs: r.timeout.Milliseconds()})
			if err != nil {
				if status.Code(err) == codes.NotFound {
					return fmt.Errorf("key %q not found at %s", args[0], r.endpoint)
				}
				return r.explain(err)
			}
			v := toJSON(res.Version)
			if res.Snapshot != nil {
				h := hlcOf(res.Snapshot)
				v.Snapshot = &h
			}
			v.Answered = res.Answered
			return printVersions(cmd.OutOrStdout(), g.output, []versionJSON{v}, true)
		},
	}
	get.Flags().StringVar(&stable, "stable", "", "read the newest version stable under this predicate")
	get.Flags().StringVar(&quorum, "quorum", "", "read from sites satisfying the dual of this predicate")
	get.Flags().StringVar(&snapshot, "snapshot", "", "read at this predicate's global stable time")
	get.Flags().StringVar(&session, "session", "", "session token from put -o json: wait until the site applied those writes")
	get.MarkFlagsMutuallyExclusive("stable", "quorum", "snapshot")
	var limit uint32
	scan := &cobra.Command{
		Use:     "scan PREFIX",
		Short:   "List live keys with a prefix, in key order",
		Example: `  kvctl scan jobs/ --limit 20 -o table`,
		Args:    exactArgs("PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := r.open("text", "json", "table")
			if err != nil {
				return err
			}
			defer done()
			res, err := c.KV.Scan(ctx, &kvpb.ScanRequest{Prefix: args[0], Limit: limit, TimeoutMs: r.timeout.Milliseconds()})
			if err != nil {
				return r.explain(err)
			}
			var vs []versionJSON
			for _, v := range res.Versions {
				vs = append(vs, toJSON(v))
			}
			return printVersions(cmd.OutOrStdout(), g.output, vs, false)
		},
	}
	scan.Flags().Uint32Var(&limit, "limit", 0, "at most this many keys (0: all)")
	var watchStable string
	watch := &cobra.Command{
		Use:   "watch PREFIX",
		Short: "Print changes of keys with a prefix as the site applies them, until interrupted",
		Example: `  kvctl watch events/
  kvctl watch ckpt/ --stable majority -o json`,
		Args: exactArgs("PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, stop := signalContext()
			defer stop()
			st, err := c.KV.Watch(ctx, &kvpb.WatchRequest{Prefix: args[0], Stable: watchStable})
			if err != nil {
				return r.explain(err)
			}
			for {
				ev, err := st.Recv()
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, io.EOF) {
						return nil
					}
					return r.explain(err)
				}
				v := toJSON(ev.Version)
				if g.output == "json" {
					_ = writeJSON(cmd.OutOrStdout(), v)
					continue
				}
				verb := "put"
				if v.Deleted {
					verb = "del"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s (%s seq %d)\n", verb, v.Key, v.text(), v.Origin, v.Seq)
			}
		},
	}
	watch.Flags().StringVar(&watchStable, "stable", "", "pass a change on only once it is stable under this predicate")
	return []*cobra.Command{put, get, del, scan, watch}
}

type writeJSONOut struct {
	Key     string  `json:"key"`
	Origin  string  `json:"origin"`
	Seq     uint64  `json:"seq"`
	HLC     hlcJSON `json:"hlc"`
	Wait    string  `json:"wait,omitempty"`
	Session string  `json:"session"`
}

func printWrite(w io.Writer, format, key, wait string, res *kvpb.WriteResponse, c *kvclient.Client) error {
	out := writeJSONOut{Key: key, Origin: res.Origin, Seq: res.Seq, HLC: hlcOf(res.Hlc), Wait: wait, Session: kvclient.FormatSession(c.Session())}
	switch format {
	case "json":
		return writeJSON(w, out)
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tORIGIN\tSEQ\tHLC\tSESSION")
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", key, out.Origin, out.Seq, out.HLC, out.Session)
		return tw.Flush()
	}
	if out.Origin == kvpb.LinOrigin {
		fmt.Fprintf(w, "OK %s version %d (linearizable)\n", key, out.Seq)
		return nil
	}
	fmt.Fprintf(w, "OK %s/kv seq %d\n", out.Origin, out.Seq)
	return nil
}

// open checks the output format against what the command supports, then
// connects; done closes what it opened.
func (r *remote) open(formats ...string) (*kvclient.Client, context.Context, func(), error) {
	if err := r.g.checkOutput(formats...); err != nil {
		return nil, nil, nil, err
	}
	c, ctx, cancel, err := r.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	return c, ctx, func() { cancel(); c.Close() }, nil
}

package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestExplainTLS: the ways a TLS mismatch reaches kvctl, which gRPC reports
// as Unavailable, become messages that say what to change.
func TestExplainTLS(t *testing.T) {
	plain := &remote{endpoint: "127.0.0.1:7000"}
	withTLS := &remote{endpoint: "127.0.0.1:7000", caFile: "ca.pem"}
	for _, c := range []struct {
		r    *remote
		msg  string
		want string
	}{
		{plain, `connection error: desc = "error reading server preface: http2: frame too large"`, "may require TLS"},
		{withTLS, `connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`, "does not speak TLS"},
		{withTLS, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`, "failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (check"},
		{withTLS, `write tcp 127.0.0.1:1->127.0.0.1:7000: write: broken pipe`, "is --cert signed by the CA the site trusts"},
		{plain, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7000: connect: connection refused"`, "is stabilizerd running there?"},
	} {
		got := c.r.explain(status.Error(codes.Unavailable, c.msg)).Error()
		if !strings.Contains(got, c.want) {
			t.Errorf("%s\n got %s\nwant it to contain %q", c.msg, got, c.want)
		}
	}
}

// TestExplainDiskFull: a write refused by a full site says what to do.
func TestExplainDiskFull(t *testing.T) {
	r := &remote{endpoint: "127.0.0.1:7000"}
	msg := `kv: write "jobs/7": stabilizer: append batch to "kv": site eu-west-1: 41.2 MiB free under /data, reserve 256.0 MiB (writes resume above 320.0 MiB): stabilizer: disk full`
	got := r.explain(status.Error(codes.ResourceExhausted, msg)).Error()
	for _, want := range []string{msg, "the site at 127.0.0.1:7000 is out of disk space", "once space is freed"} {
		if !strings.Contains(got, want) {
			t.Errorf("got %s\nwant it to contain %q", got, want)
		}
	}
}

// TestExplainWrongParty: a quorum read refused because a peer is down does
// not blame the healthy site it asked, and kvctl pointed at a site's http
// port says so rather than suspecting TLS.
func TestExplainWrongParty(t *testing.T) {
	r := &remote{endpoint: "127.0.0.1:7000"}
	msg := `kv: quorum not reached: "majority" needs answers satisfying kth_max(2, applied(...)); 1 of 3 sites answered (us-east-1); failed: eu-west-1: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7001: connect: connection refused"`
	got := r.explain(status.Error(codes.Unavailable, msg)).Error()
	if strings.Contains(got, "is stabilizerd running there") || !strings.Contains(got, "the site at 127.0.0.1:7000 is up") {
		t.Errorf("quorum read with a peer down:\n%s", got)
	}

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer web.Close()
	r = &remote{endpoint: strings.TrimPrefix(web.URL, "http://")}
	got = r.explain(status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: http2: frame too large"`)).Error()
	if !strings.Contains(got, "answers HTTP/1.1, not gRPC") || strings.Contains(got, "TLS") {
		t.Errorf("kvctl at an http port:\n%s", got)
	}
}

// TestExplainRaw: what gRPC says of a request it could not carry comes out
// as what the user gave and what to do.
func TestExplainRaw(t *testing.T) {
	r := &remote{endpoint: "nosuch.invalid:7000"}
	for _, c := range []struct {
		code codes.Code
		msg  string
		want string
	}{
		{codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8", "not valid UTF-8: keys, topics and predicates are UTF-8 text"},
		{codes.ResourceExhausted, "grpc: received message larger than max (20000013 vs. 8519680)", "the request is 20000013 bytes, over the 8519680 bytes"},
		{codes.ResourceExhausted, "grpc: trying to send message larger than max (20000013 vs. 16777216)", "kv.max_value_bytes"},
		{codes.Unavailable, "name resolver error: produced zero addresses", "cannot resolve the host of --endpoint nosuch.invalid:7000"},
	} {
		got := r.explain(status.Error(c.code, c.msg)).Error()
		if !strings.Contains(got, c.want) || strings.Contains(got, "grpc:") {
			t.Errorf("%s\n got %s\nwant it to contain %q and no gRPC text", c.msg, got, c.want)
		}
	}
}

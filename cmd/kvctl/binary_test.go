package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// binaryKV is a site whose only key holds bytes that are not UTF-8.
type binaryKV struct {
	kvpb.UnimplementedKVServer
	value []byte
}

func (s *binaryKV) version() *kvpb.Version {
	return &kvpb.Version{Key: "ckpt/7/shard", Value: s.value, Origin: "us-east-1", Seq: 3}
}

func (s *binaryKV) Get(context.Context, *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	return &kvpb.GetResponse{Version: s.version()}, nil
}

func (s *binaryKV) Scan(context.Context, *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	return &kvpb.ScanResponse{Versions: []*kvpb.Version{s.version()}}, nil
}

func serveBinaryKV(t *testing.T, value []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	kvpb.RegisterKVServer(g, &binaryKV{value: value})
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// TestGetBinaryValue: a value that is not UTF-8 survives a command-line
// round trip (get writes its exact bytes), and the outputs that cannot
// carry it (scan, table) say what it is instead of printing nothing.
func TestGetBinaryValue(t *testing.T) {
	value := []byte{0x89, 'P', 'N', 'G', 0xff, 0x00, 0xfe, '\n'}
	endpoint := serveBinaryKV(t, value)
	kvctl := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append(args, "--endpoint", endpoint), &out, &errOut); code != 0 {
			t.Fatalf("kvctl %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
		}
		return out.String(), errOut.String()
	}
	for _, args := range [][]string{{"get", "ckpt/7/shard"}, {"get", "ckpt/7/shard", "--stable", "majority"}} {
		if out, _ := kvctl(args...); out != string(value) {
			t.Errorf("kvctl %s wrote %q, want the value's bytes %q", strings.Join(args, " "), out, value)
		}
	}
	out, _ := kvctl("get", "ckpt/7/shard", "-o", "json")
	if !strings.Contains(out, base64.StdEncoding.EncodeToString(value)) {
		t.Errorf("kvctl get -o json: %s, want value_base64 of the value", out)
	}
	for _, args := range [][]string{{"scan", "ckpt/"}, {"get", "ckpt/7/shard", "-o", "table"}} {
		if out, _ := kvctl(args...); !strings.Contains(out, "8 bytes, not UTF-8") {
			t.Errorf("kvctl %s: %q, want the value's size and how to get it", strings.Join(args, " "), out)
		}
	}
}

// TestKVEndpointsFailOver: KV commands take a comma-separated --endpoint
// and use the first site that answers, as the pub/sub commands do.
func TestKVEndpointsFailOver(t *testing.T) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := down.Addr().String()
	down.Close() // nothing listens there now
	up := serveBinaryKV(t, []byte("step-1200"))
	var out, errOut bytes.Buffer
	if code := run([]string{"get", "ckpt/7/shard", "--endpoint", dead + "," + up}, &out, &errOut); code != 0 || out.String() != "step-1200\n" {
		t.Fatalf("get with the first endpoint down: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"get", "ckpt/7/shard", "--endpoint", dead + "," + dead}, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "cannot reach any site of --endpoint") || !strings.Contains(errOut.String(), dead) {
		t.Fatalf("get with every endpoint down: exit %d, stderr %q", code, errOut.String())
	}
}

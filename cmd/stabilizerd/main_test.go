package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBadConfigFailsAtStartNamingTheField(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "site.yaml")
	cfg := `site: us-east-1
sites: [{name: us-east-1}, {name: eu-west-1, data: "127.0.0.1:1", control: "nope", client: "127.0.0.1:3"}]
listen: {data: "127.0.0.1:0", control: "127.0.0.1:0", client: "127.0.0.1:0", http: "127.0.0.1:0"}
data_dir: data
insecure: true
predicates:
  two: kth_max(4, persisted(sites))
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--config", path}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`sites[1].control: "nope" is not host:port`, "predicates.two: 1:9: k = 4 is out of range"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Fatal("a bad config must not create the data folder")
	}
}

func TestMissingConfigFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--config FILE is required") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestGenconfigErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"genconfig", "--sites", "a,b", "--dir", t.TempDir(), "--groups", "eu"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `--groups: "eu" is not name=site`) {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"genconfig", "--sites", "a,b", "--dir", t.TempDir(), "--groups", "eu=c"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `groups.eu: unknown site "c"`) {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(good, `site: a
sites: [{name: a}, {name: b, data: "b:1", control: "b:2", client: "b:3"}]
listen: {data: ":1", control: ":2", client: ":3", http: ":4"}
data_dir: /nonexistent/data
tls: {cert: /nonexistent/tls.crt, key: /nonexistent/tls.key, ca: /nonexistent/ca.crt}
`)
	write(bad, "site: c\nsites: [{name: a}]\nlisten: {data: \":1\", control: \":2\", client: \":3\", http: \":4\"}\ndata_dir: d\n")
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--skip-files", "--config", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), good+": ok") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	// Without --skip-files the TLS files must be there, as at a site's start.
	out.Reset()
	if code := run([]string{"check", "--config", good}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "tls.cert /nonexistent/tls.crt") || !strings.Contains(errb.String(), "--skip-files") {
		t.Fatalf("check with missing TLS files: exit %d: %s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	ports := filepath.Join(dir, "ports.yaml")
	write(ports, `site: a
sites: [{name: a}, {name: b, data: "b:99999", control: "b:0", client: "b:3"}]
listen: {data: ":1", control: ":2", client: ":-3", http: ":0"}
data_dir: d
insecure: true
`)
	if code := run([]string{"check", ports}, &out, &errb); code != 1 {
		t.Fatalf("check of ports out of range: exit %d", code)
	}
	for _, want := range []string{`sites[1].data: "b:99999": port "99999" is not a number from 1 to 65535`,
		`sites[1].control: "b:0": port "0" is not a number from 1 to 65535`, `listen.client: ":-3": port "-3"`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(errb.String(), "listen.http") {
		t.Errorf("listen port 0 (any free port) refused:\n%s", errb.String())
	}
	errb.Reset()
	out.Reset()
	if code := run([]string{"check", "-o", "json", "--skip-files", good, ports}, &out, &errb); code != 1 {
		t.Fatalf("check -o json: exit %d", code)
	}
	var results []struct {
		File   string
		OK     bool
		Site   string
		Errors []string
	}
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != 2 || !results[0].OK || results[0].Site != "a" ||
		results[1].OK || len(results[1].Errors) != 3 {
		t.Fatalf("check -o json: %v\n%s", err, out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"check", "--skip-files", good, "--config", bad}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`site: "c" is not one of sites (a)`, "tls: cert, key and ca are required", "1 of 2 config files are bad"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	errb.Reset()
	if code := run([]string{"check"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--config FILE is required") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestHealth(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		fmt.Fprintln(w, "ok a up 1s")
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"health", "--url", srv.URL + "/healthz"}, &out, &errb); code != 0 || out.String() != "ok a up 1s\n" {
		t.Fatalf("exit %d: %q %s", code, out.String(), errb.String())
	}
	status = http.StatusServiceUnavailable
	if code := run([]string{"health", "--url", srv.URL + "/healthz"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "503 Service Unavailable") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"health", "--url", "127.0.0.1:8080"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--url") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestGenconfigKubernetes(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"genconfig", "--topology", "ec2-3", "--kubernetes", dir, "--address", "ap-northeast-1=stab.ap.example.com"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "us-east-1", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stab.ap.example.com:7101", "stabilizer-0.stabilizer-peers.eu-west-1.svc.cluster.local:7100", "us:\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("site.yaml lacks %q:\n%s", want, b)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology", "ec2-3", "--sites", "a", "--kubernetes", dir}, "--topology and --sites/--groups: give one"},
		{[]string{"--topology", "mars", "--kubernetes", dir}, `--topology: `},
		{[]string{"--topology", "ec2-3", "--kubernetes", dir, "--address", "eu-west-1"}, `--address "eu-west-1": not region=host`},
		{[]string{"--topology", "ec2-3", "--kubernetes", dir, "--address", "mars=h"}, `--address mars=h: unknown site "mars"`},
		{[]string{"--topology", "ec2-3", "--dir", dir, "--address", "eu-west-1=h"}, "only with --kubernetes"},
		{[]string{"--topology", "ec2-3", "--dir", dir, "--kubernetes", dir}, "--dir and --kubernetes: give one"},
	} {
		errb.Reset()
		if code := run(append([]string{"genconfig"}, tc.args...), &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d: %s, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

package main

import (
	"bytes"
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

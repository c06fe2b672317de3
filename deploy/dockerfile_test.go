package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dockerfile is the image's recipe, the build context the repository root.
const dockerfile = "Dockerfile"

// baseImages returns the images the Dockerfile's ARGs default to.
func baseImages(t *testing.T, src string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^ARG (GO_IMAGE|RUN_IMAGE)=(\S+)$`).FindAllStringSubmatch(src, -1) {
		out = append(out, m[2])
	}
	if len(out) != 2 {
		t.Fatalf("%s: want ARG GO_IMAGE=... and ARG RUN_IMAGE=..., found %v", dockerfile, out)
	}
	return out
}

// TestDockerfile reads the Dockerfile: a builder stage and a final one,
// static binaries, a non-root numeric user, stabilizerd as entry point,
// the data volume and the ports of the site configs.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	images := baseImages(t, src)
	if !strings.HasPrefix(images[0], "golang:1.26") || strings.HasSuffix(images[0], ":latest") {
		t.Errorf("builder %s: want golang:1.26, pinned by tag", images[0])
	}
	if froms := regexp.MustCompile(`(?m)^FROM `).FindAllString(src, -1); len(froms) < 2 {
		t.Errorf("%d FROM lines: want a multi-stage build", len(froms))
	}
	var stages []string // each stage's text, after its FROM
	for _, s := range regexp.MustCompile(`(?m)^FROM `).Split(src, -1)[1:] {
		stages = append(stages, s)
	}
	final := stages[len(stages)-1]
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ENV .*CGO_ENABLED=0`),
		regexp.MustCompile(`go build .*\./cmd/stabilizerd .*\./cmd/kvctl .*\./cmd/stabsync`),
	} {
		if !want.MatchString(stages[0]) {
			t.Errorf("builder stage lacks %s", want)
		}
	}
	m := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindStringSubmatch(final)
	if m == nil || m[1] == "0" {
		t.Errorf("final stage: want a numeric non-root USER, got %v", m)
	}
	for _, want := range []string{`ENTRYPOINT ["/usr/local/bin/stabilizerd"]`, `VOLUME ["/var/lib/stabilizer"]`,
		"EXPOSE 7100 7101 7102 8080", "WORKDIR /var/lib/stabilizer"} {
		if !strings.Contains(final, want) {
			t.Errorf("final stage lacks %s", want)
		}
	}
	if _, err := os.Stat("../.dockerignore"); err != nil {
		t.Errorf("no .dockerignore at the build context's root: %v", err)
	}
}

// TestDockerBuild builds the image where a docker daemon answers and both
// base images are already present; it never pulls one.
func TestDockerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no docker build")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no docker daemon answers: %s", bytes.TrimSpace(out))
	}
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range baseImages(t, string(b)) {
		if err := exec.CommandContext(ctx, docker, "image", "inspect", img).Run(); err != nil {
			t.Skipf("base image %s is not present locally (this test pulls nothing: docker pull %s)", img, img)
		}
	}
	cmd := exec.Command(docker, "build", "--pull=false", "-t", "stabilizer:test", "-f", "deploy/Dockerfile", ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	out, err := exec.Command(docker, "run", "--rm", "stabilizer:test", "check", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run stabilizer:test check --help: %v\n%s", err, out)
	}
}

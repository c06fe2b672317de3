package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v3"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// The dashboard and the alert rules in deploy/monitoring must use metric
// names, and label names, that a live site exports. These tests read every
// PromQL expression of both files, extract the metric names and labels
// they use, start sites, make every family appear and scrape them.
//
// The extraction, on an expression with its string literals blanked out
// (so that a label value is never taken for a name):
//   - a metric is an identifier that starts with one of metricPrefixes;
//     name_bucket, name_sum and name_count stand for the histogram (or
//     summary) family name when the scrape has no family of their own name;
//   - the labels in name{label="..."} matchers belong to that metric;
//   - the labels in by, without, on, ignoring, group_left and group_right
//     belong to the expression: each must be on one of its metrics;
//   - label_values(name{...}, label), a dashboard variable's query, names a
//     label of that metric.
//
// instance and job are the labels Prometheus adds to every target, le the
// one of histogram buckets: they are never missing.

const monitoringDir = "../deploy/monitoring"

// metricPrefixes are the prefixes of the metric names a site registers (a
// prometheus.NewDesc, CounterOpts or GaugeOpts Name in the repository);
// the live test checks that every family a site exports, besides the Go
// runtime's and the process's, has one of them.
var metricPrefixes = []string{"stabilizer_", "kv_", "pubsub_", "fileshare_"}

// runtimePrefixes are the families of client_golang's own collectors.
var runtimePrefixes = []string{"go_", "process_", "promhttp_"}

// targetLabels are on every series Prometheus stores, not in a scrape.
var targetLabels = []string{"instance", "job"}

// promExpr is one PromQL expression and where it comes from.
type promExpr struct {
	where, expr string
}

// metricRef is a metric an expression names, with the labels its
// matchers use.
type metricRef struct {
	name   string
	labels []string
}

// exprRefs are what one expression uses.
type exprRefs struct {
	metrics  []metricRef
	grouping []string // labels of by, on, ... clauses and label_values
}

var (
	stringLit   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	metricName  = regexp.MustCompile(`\b((?:` + strings.Join(trimAll(metricPrefixes, "_"), "|") + `)_[A-Za-z0-9_:]*)\s*(\{[^}]*\})?`)
	matcherName = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupClause = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	// upSeries: Prometheus's own series of whether a scrape worked.
	upSeries    = regexp.MustCompile(`\bup\b`)
	labelValues = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)`)
)

func trimAll(ss []string, suffix string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.TrimSuffix(s, suffix)
	}
	return out
}

// extract finds the metrics and labels expr uses.
func extract(expr string) exprRefs {
	var r exprRefs
	// label_values(name, label) before the strings go: its label is
	// outside them, but its matchers may hold a "}".
	for _, m := range labelValues.FindAllStringSubmatch(stringLit.ReplaceAllString(expr, `""`), -1) {
		r.metrics = append(r.metrics, metricRef{name: m[1]})
		r.grouping = append(r.grouping, m[2])
	}
	bare := stringLit.ReplaceAllString(expr, `""`)
	for _, m := range metricName.FindAllStringSubmatch(bare, -1) {
		ref := metricRef{name: m[1]}
		for _, l := range matcherName.FindAllStringSubmatch(m[2], -1) {
			ref.labels = append(ref.labels, l[1])
		}
		r.metrics = append(r.metrics, ref)
	}
	for _, m := range groupClause.FindAllStringSubmatch(bare, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				r.grouping = append(r.grouping, l)
			}
		}
	}
	return r
}

// family is what a scrape says of one metric family: its type and every
// label name any of its series has.
type family struct {
	typ    dto.MetricType
	labels map[string]bool
}

// resolve maps a name an expression uses to the family of the scrape it
// belongs to, "" when there is none.
func resolve(name string, fams map[string]family) string {
	if _, ok := fams[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := fams[base]; ok && (f.typ == dto.MetricType_HISTOGRAM || f.typ == dto.MetricType_SUMMARY) {
			return base
		}
	}
	return ""
}

// hasLabel says whether label may be on the series of family name, as an
// expression names it (name may be a _bucket series).
func hasLabel(fams map[string]family, fam, name, label string) bool {
	if slices.Contains(targetLabels, label) || fams[fam].labels[label] {
		return true
	}
	return label == "le" && strings.HasSuffix(name, "_bucket")
}

// checkExprs lists every metric and label of exprs that fams lacks, each
// once, sorted.
func checkExprs(exprs []promExpr, fams map[string]family) []string {
	problems := map[string]bool{}
	for _, e := range exprs {
		r := extract(e.expr)
		if len(r.metrics) == 0 && !upSeries.MatchString(stringLit.ReplaceAllString(e.expr, `""`)) {
			problems[fmt.Sprintf("%s: no metric of ours in %q", e.where, e.expr)] = true
		}
		var found []metricRef // resolved to families
		for _, m := range r.metrics {
			fam := resolve(m.name, fams)
			if fam == "" {
				problems[fmt.Sprintf("metric %s (%s)", m.name, e.where)] = true
				continue
			}
			found = append(found, metricRef{name: m.name, labels: []string{fam}})
			for _, l := range m.labels {
				if !hasLabel(fams, fam, m.name, l) {
					problems[fmt.Sprintf("label %s on %s (%s)", l, m.name, e.where)] = true
				}
			}
		}
		if len(found) == 0 {
			continue // reported above
		}
		for _, l := range r.grouping {
			if !slices.ContainsFunc(found, func(m metricRef) bool { return hasLabel(fams, m.labels[0], m.name, l) }) {
				problems[fmt.Sprintf("label %s in a by/on clause (%s): on none of its metrics", l, e.where)] = true
			}
		}
	}
	out := make([]string, 0, len(problems))
	for p := range problems {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// The rule file, read strictly: a misspelt key fails.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
			For    string `yaml:"for"`
			Labels struct {
				Severity string `yaml:"severity"`
			} `yaml:"labels"`
			Annotations struct {
				Summary     string `yaml:"summary"`
				Description string `yaml:"description"`
			} `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs reads alerts.yaml, checks every rule is complete and returns
// the rules' expressions.
func alertExprs(t *testing.T) []promExpr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var out []promExpr
	seen := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("alerts.yaml: group %q: want a name and rules", g.Name)
		}
		for i, r := range g.Rules {
			var lacks []string
			for _, f := range []struct{ name, v string }{{"alert", r.Alert}, {"expr", r.Expr}, {"for", r.For},
				{"labels.severity", r.Labels.Severity}, {"annotations.summary", r.Annotations.Summary},
				{"annotations.description", r.Annotations.Description}} {
				if strings.TrimSpace(f.v) == "" {
					lacks = append(lacks, f.name)
				}
			}
			if len(lacks) > 0 {
				t.Errorf("alerts.yaml: group %s, rule %d (%s): no %s", g.Name, i, r.Alert, strings.Join(lacks, ", "))
			}
			if _, err := model.ParseDuration(r.For); r.For != "" && err != nil {
				t.Errorf("alerts.yaml: %s: for %q: %v", r.Alert, r.For, err)
			}
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels.Severity) {
				t.Errorf("alerts.yaml: %s: severity %q: want critical, warning or info", r.Alert, r.Labels.Severity)
			}
			if seen[r.Alert] {
				t.Errorf("alerts.yaml: alert %s twice", r.Alert)
			}
			seen[r.Alert] = true
			out = append(out, promExpr{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatal("alerts.yaml: no rules")
	}
	return out
}

// dashboardExprs reads the Grafana dashboard, checks what an import
// needs and returns every panel target's expr and every query variable's
// query.
func dashboardExprs(t *testing.T) []promExpr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "grafana", "stabilizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Type  string `json:"type"`
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("stabilizer.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 39 {
		t.Errorf("stabilizer.json: title %q, uid %q, schemaVersion %d: want a title, a uid and schemaVersion 39 or later", d.Title, d.UID, d.SchemaVersion)
	}
	var out []promExpr
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch q := v.Query.(type) {
		case string:
			if v.Type == "datasource" && q != "prometheus" {
				t.Errorf("stabilizer.json: variable %s: a datasource of type %q, want prometheus", v.Name, q)
			}
			if v.Type == "query" {
				out = append(out, promExpr{where: "variable " + v.Name, expr: q})
			}
		case map[string]any:
			if s, _ := q["query"].(string); v.Type == "query" && s != "" {
				out = append(out, promExpr{where: "variable " + v.Name, expr: s})
			}
		}
	}
	for _, name := range []string{"datasource", "instance"} {
		if !vars[name] {
			t.Errorf("stabilizer.json: no variable %s", name)
		}
	}
	for _, raw := range d.Panels {
		var p struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("stabilizer.json: panel: %v", err)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("stabilizer.json: panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, promExpr{where: "panel " + p.Title, expr: tg.Expr})
		}
	}
	return out
}

func TestMetricRefsExtract(t *testing.T) {
	e := `histogram_quantile(0.99, sum by (predicate, le) (rate(stabilizer_wait_seconds_bucket{instance=~"$instance", predicate="kv_fake"}[5m])))` +
		` / on (origin) group_left kv_log_retained_entries`
	r := extract(e)
	got := fmt.Sprint(r.metrics, r.grouping)
	want := "[{stabilizer_wait_seconds_bucket [instance predicate]} {kv_log_retained_entries []}] [predicate le origin]"
	if got != want {
		t.Errorf("extract:\n got %s\nwant %s", got, want)
	}
	r = extract(`label_values(stabilizer_frontier{instance=~"$instance"}, predicate)`)
	if got := fmt.Sprint(r.metrics[0].name, " ", r.grouping); got != "stabilizer_frontier [predicate]" {
		t.Errorf("label_values: got %s", got)
	}
	// Against a scrape that has the histogram only, with a predicate label:
	// the kv family is missing, and with it the only metric that could
	// have origin; le and instance are not. An expression of none of our
	// metrics is reported, unless it is on Prometheus's own up.
	fams := map[string]family{"stabilizer_wait_seconds": {typ: dto.MetricType_HISTOGRAM, labels: map[string]bool{"predicate": true, "site": true}}}
	problems := checkExprs([]promExpr{{"sample", e}, {"empty", `vector(1)`}, {"up", `up{job="stabilizer"} == 0`}}, fams)
	want = `[empty: no metric of ours in "vector(1)" label origin in a by/on clause (sample): on none of its metrics metric kv_log_retained_entries (sample)]`
	if got := fmt.Sprint(problems); got != want {
		t.Errorf("check:\n got %s\nwant %s", got, want)
	}
	fams["kv_log_retained_entries"] = family{typ: dto.MetricType_GAUGE, labels: map[string]bool{}}
	problems = checkExprs([]promExpr{{"sample", e}, {"suffix", `stabilizer_wait_seconds_total{site="x"}`}}, fams)
	want = "[label origin in a by/on clause (sample): on none of its metrics metric stabilizer_wait_seconds_total (suffix)]"
	if got := fmt.Sprint(problems); got != want {
		t.Errorf("check:\n got %s\nwant %s", got, want)
	}
}

// TestMonitoringFilesParse checks the rule file and the dashboard alone,
// without sites.
func TestMonitoringFilesParse(t *testing.T) {
	for _, e := range append(alertExprs(t), dashboardExprs(t)...) {
		if len(extract(e.expr).metrics) == 0 && !upSeries.MatchString(e.expr) {
			t.Errorf("%s: no metric of ours in %q", e.where, e.expr)
		}
	}
}

// scrape reads a site's /metrics into families.
func scrape(addr string, into map[string]family) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("parse %s/metrics: %w", addr, err)
	}
	for name, mf := range mfs {
		f, ok := into[name]
		if !ok {
			f = family{typ: mf.GetType(), labels: map[string]bool{}}
			into[name] = f
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				f.labels[l.GetName()] = true
			}
		}
	}
	return nil
}

// putChunkTwice uploads one chunk twice to a site's file share API and
// expects the second to be a duplicate.
func putChunkTwice(t *testing.T, addr, share string, data []byte) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := filesharepb.NewFileShareClient(conn).PutChunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(data)
	for i := range 2 {
		if err := st.Send(&filesharepb.PutChunkRequest{Hash: h[:], Data: data, Share: share}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("put chunk %d: %v", i, err)
		}
		if r.Duplicate != (i == 1) {
			t.Fatalf("put chunk %d: duplicate %v", i, r.Duplicate)
		}
	}
	_ = st.CloseSend()
}

// TestMonitoringMetricsExist starts three sites, writes a key, publishes
// and consumes messages and syncs a file so that every family appears,
// then checks that every metric and label the dashboard and the alerts
// use is in the sites' scrapes.
func TestMonitoringMetricsExist(t *testing.T) {
	exprs := append(alertExprs(t), dashboardExprs(t)...)
	c := startCluster(t, three...)
	deadline := time.Now().Add(30 * time.Second)
	waitConnected(t, c, deadline)
	us, eu := three[0], three[1]
	mustKvctl := func(site string, args ...string) string {
		t.Helper()
		out, errOut, code := c.kvctl(site, args...)
		if code != 0 {
			t.Fatalf("kvctl %s at %s: exit %d: %s", strings.Join(args, " "), site, code, errOut)
		}
		return out
	}
	// KV: writes under two named predicates (wait histogram, frontiers,
	// kv log retention at every site).
	mustKvctl(us, "put", "jobs/7", "queued", "--wait", "majority")
	mustKvctl(eu, "put", "jobs/8", "running", "--wait", "all")
	// Pub/sub: a subscription left with unacked messages and one that acks.
	mustKvctl(us, "topic", "create", "orders")
	mustKvctl(us, "pub", "orders", "m1", "m2")
	mustKvctl(us, "sub", "orders", "--durable", "backlog", "--start", "all", "--count", "2", "--no-ack")
	mustKvctl(us, "sub", "orders", "--durable", "worker", "--start", "all", "--count", "2")
	// Files: a share and a file written at us-east-1 and synced to
	// eu-west-1.
	folders := map[string]string{}
	for i, site := range []string{us, eu} {
		dir := filepath.Join(c.dir, "folder-"+site)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"init", dir, "--share", "ckpt", "--site", c.info(site).Client, "--settle", "50ms"}
		if i == 0 {
			args = append(args, "--create")
		}
		until(t, deadline, func() error {
			out, err := exec.Command(filepath.Join(bin, "stabsync"), args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("stabsync %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return nil
		})
		folders[site] = dir
	}
	data := bytes.Repeat([]byte("checkpoint "), 20000)
	if err := os.WriteFile(filepath.Join(folders[us], "a.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, site := range []string{us, eu} {
		cmd := exec.Command(filepath.Join(bin, "stabsync"), "run", folders[site])
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("stabsync run at %s: %v\n%s", site, err, out.String())
			}
		})
	}
	until(t, deadline, func() error {
		if b, err := os.ReadFile(filepath.Join(folders[eu], "a.bin")); err != nil || !bytes.Equal(b, data) {
			return fmt.Errorf("a.bin not synced to %s yet (%v)", eu, err)
		}
		return nil
	})
	// A client only uploads what the site says it lacks: a chunk put
	// twice is the deduplicated upload a race between two clients makes.
	putChunkTwice(t, c.info(us).Client, "ckpt", []byte("a chunk put twice"))

	var fams map[string]family
	until(t, deadline, func() error {
		fams = map[string]family{}
		for _, s := range c.sites {
			if err := scrape(s.HTTP, fams); err != nil {
				return err
			}
		}
		if problems := checkExprs(exprs, fams); len(problems) > 0 {
			return fmt.Errorf("the dashboard and the alerts use what no site exports:\n  %s", strings.Join(problems, "\n  "))
		}
		return nil
	})
	var unprefixed []string
	for name := range fams {
		if !slices.ContainsFunc(append(metricPrefixes, runtimePrefixes...), func(p string) bool { return strings.HasPrefix(name, p) }) {
			unprefixed = append(unprefixed, name)
		}
	}
	if len(unprefixed) > 0 {
		sort.Strings(unprefixed)
		t.Errorf("families with a prefix not in metricPrefixes (add it, so the extraction sees them): %s", strings.Join(unprefixed, ", "))
	}
}

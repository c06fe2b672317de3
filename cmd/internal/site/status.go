package site

import (
	"context"
	"encoding/json"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// statusView is what the status page and status.json show.
type statusView struct {
	Site      string
	Sites     []string
	Connected map[string]bool
	Uptime    string
	Disk      stabilizer.DiskStatus
	Streams   []streamView
	Preds     []predView
	Topics    []topicView
	Shares    []fileshare.ShareStatus
	Chunks    fileshare.GCStats // the chunk collector's last pass
	// Retention: per stream what this site keeps of its log; Usage, the
	// store's disk use per application; Transfers, state transfers in
	// progress.
	Retention []retentionView
	Usage     []usageView
	DiskTotal string
	Transfers []stabilizer.TransferStatus
}

type retentionView struct {
	Stream          string
	Head, Truncated uint64
	Retained        uint64 // entries Truncated+1..Head
	LogBytes        string
	Behind          bool
}

type usageView struct {
	Namespace string
	Bytes     string
}

type topicView struct {
	Name, PublishAck, Delivery string
	Retention                  string // the policy, then the limits set
	Stored, StoredBytes        uint64 // stored here, every origin
	Origins                    []topicOrigin
	Audience                   []string
	Subs                       []subView
}

// topicOrigin is where retention left an origin's messages of a topic here.
type topicOrigin struct {
	Origin              string
	FirstSeq, Truncated uint64 // first retained (0: none), dropped up to
}

type subView struct {
	Name                    string // "(ephemeral)" for one
	Site                    string
	Consumers               int
	Unacked, Delivered      uint64
	Redelivered, DeadLetter uint64
}

type predView struct{ Name, Source string }

type streamView struct {
	Origin, Stream  string
	Head, Persisted uint64
	Levels          []levelRow
	Frontiers       []frontierView
}

type levelRow struct {
	Level string
	Seqs  []uint64
}

type frontierView struct {
	Predicate string
	Seq       uint64
	Version   uint64
	Behind    uint64
}

func (s *Site) view(ctx context.Context) (statusView, error) {
	schema := s.node.Schema()
	v := statusView{Site: s.cfg.Site, Sites: schema.Sites, Connected: s.node.Connected(),
		Uptime: time.Since(s.started).Round(time.Second).String(), Disk: s.node.DiskStatus()}
	for _, d := range s.node.Predicates(ctx) {
		v.Preds = append(v.Preds, predView{d.Name, d.Source})
	}
	streams, err := s.node.Streams(ctx)
	if err != nil {
		return v, err
	}
	n := len(schema.Sites)
	for _, st := range streams {
		sv := streamView{Origin: st.Stream.Origin, Stream: st.Stream.Name, Head: st.Head, Persisted: st.Persisted}
		for l, level := range schema.LevelNames() {
			sv.Levels = append(sv.Levels, levelRow{level, st.Acks[l*n : l*n+n]})
		}
		for _, p := range v.Preds {
			f := st.Frontiers[p.Name]
			sv.Frontiers = append(sv.Frontiers, frontierView{p.Name, f.Seq, f.Version, st.Head - min(f.Seq, st.Head)})
		}
		v.Streams = append(v.Streams, sv)
		v.Retention = append(v.Retention, retentionView{Stream: st.Stream.String(), Head: st.Head, Truncated: st.Truncated,
			Retained: st.Persisted - min(st.Truncated, st.Persisted), Behind: st.Behind})
	}
	s.usageView(&v)
	v.Transfers = s.node.Transfers()
	v.Topics = s.topicsView(ctx)
	if shares, err := s.files.Status(ctx); err == nil {
		v.Shares = shares
	}
	v.Chunks = s.files.GCStatus()
	slices.SortFunc(v.Streams, func(a, b streamView) int {
		if a.Stream != b.Stream {
			if a.Stream < b.Stream {
				return -1
			}
			return 1
		}
		if a.Origin < b.Origin {
			return -1
		}
		return 1
	})
	return v, nil
}

// usageView fills in the disk use per application and per stream's log.
func (s *Site) usageView(v *statusView) {
	u, err := s.node.DiskUsage()
	if err != nil {
		return
	}
	v.DiskTotal = bytesText(u.Total)
	for _, ns := range slices.Sorted(maps.Keys(u.Namespaces)) {
		v.Usage = append(v.Usage, usageView{ns, bytesText(u.Namespaces[ns])})
	}
	for i := range v.Retention {
		for id, b := range u.Logs {
			if id.String() == v.Retention[i].Stream {
				v.Retention[i].LogBytes = bytesText(b)
			}
		}
	}
	slices.SortFunc(v.Retention, func(a, b retentionView) int { return strings.Compare(a.Stream, b.Stream) })
}

func bytesText(b uint64) string { return stabilizer.FormatBytes(int64(b)) }

func (s *Site) topicsView(ctx context.Context) []topicView {
	var out []topicView
	for _, t := range s.broker.Topics(ctx) {
		tv := topicView{Name: t.Name, PublishAck: t.PublishAck, Delivery: t.Delivery, Retention: t.Retention.String(), Audience: t.Audience}
		if tv.Delivery == "" {
			tv.Delivery = "persisted here"
		}
		for _, o := range t.Origins {
			tv.Stored += o.Messages
			tv.StoredBytes += o.Bytes
			tv.Origins = append(tv.Origins, topicOrigin{o.Origin, o.FirstSeq, o.Truncated})
		}
		for _, sub := range t.Subscriptions {
			name := sub.Name
			if !sub.Durable {
				name = "(ephemeral)"
			}
			tv.Subs = append(tv.Subs, subView{Name: name, Site: sub.Site, Consumers: sub.Consumers, Unacked: sub.Stats.Pending,
				Delivered: sub.Stats.Delivered, Redelivered: sub.Stats.Redelivered, DeadLetter: sub.Stats.DeadLettered})
		}
		out = append(out, tv)
	}
	return out
}

func (s *Site) statusJSON(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Site) statusPage(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var b strings.Builder
	if err := page.Execute(&b, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

var page = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>{{.Site}} — Stabilizer</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.up{color:#176f2c;font-weight:bold}.down{color:#b00020;font-weight:bold}
.behind{color:#b36b00}code{background:#f6f6f6;padding:0 .2em}
</style></head><body>
<h1>Site {{.Site}}</h1>
<p>Up {{.Uptime}}. This page refreshes every 2 seconds.</p>
<p>Disk: {{.Disk}}{{if .Disk.Full}}: <span class=down>FULL</span>, writes and peers' data refused until space is freed{{end}}.</p>
<h2>Sites</h2>
<table><tr><th class=l>site</th><th class=l>connection</th></tr>
{{range .Sites}}<tr><td class=l>{{.}}</td><td class=l>{{if eq . $.Site}}this site{{else if index $.Connected .}}<span class=up>connected</span>{{else}}<span class=down>not connected</span>{{end}}</td></tr>
{{end}}</table>
<h2>Predicates</h2>
<table><tr><th class=l>name</th><th class=l>predicate</th></tr>
{{range .Preds}}<tr><td class=l>{{.Name}}</td><td class=l><code>{{.Source}}</code></td></tr>{{end}}
</table>
<h2>Streams</h2>
{{range .Streams}}
<h3>{{.Origin}}/{{.Stream}} — head {{.Head}}, persisted here {{.Persisted}}</h3>
<table><tr><th class=l>level</th>{{range $.Sites}}<th>{{.}}</th>{{end}}</tr>
{{range .Levels}}<tr><td class=l>{{.Level}}</td>{{range .Seqs}}<td>{{.}}</td>{{end}}</tr>{{end}}
</table>
<table><tr><th class=l>predicate</th><th>frontier</th><th>behind head</th><th>version</th></tr>
{{range .Frontiers}}<tr><td class=l>{{.Predicate}}</td><td>{{.Seq}}</td><td class="{{if .Behind}}behind{{end}}">{{.Behind}}</td><td>{{.Version}}</td></tr>{{end}}
</table>
{{else}}<p>No streams yet.</p>{{end}}
<h2>Retention</h2>
<p>Store on disk: {{.DiskTotal}}.{{range .Transfers}} State transfer of <b>{{.Stream}}</b>{{if .Source}} from {{.Source}}: {{.Bytes}} of {{.TotalBytes}} bytes{{end}}{{if .Waiting}}: waiting for {{.Waiting}}{{end}}.{{end}}</p>
<table><tr><th class=l>stream</th><th>head</th><th>dropped up to</th><th>entries kept</th><th>log on disk</th><th class=l></th></tr>
{{range .Retention}}<tr><td class=l>{{.Stream}}</td><td>{{.Head}}</td><td>{{.Truncated}}</td><td>{{.Retained}}</td><td>{{.LogBytes}}</td><td class=l>{{if .Behind}}<span class=behind>behind: catching up from a snapshot</span>{{end}}</td></tr>{{end}}
</table>
<table><tr><th class=l>application</th><th>on disk</th></tr>
{{range .Usage}}<tr><td class=l>{{.Namespace}}</td><td>{{.Bytes}}</td></tr>{{end}}
</table>
<h2>Topics</h2>
{{range .Topics}}
<h3>{{.Name}} — {{.Stored}} messages stored here ({{.StoredBytes}} bytes)</h3>
<p>publish-ack <code>{{.PublishAck}}</code>, delivery <code>{{.Delivery}}</code>, retention <code>{{.Retention}}</code>{{if .Audience}}, audience {{range .Audience}}{{.}} {{end}}{{end}}</p>
{{if .Origins}}<p>first retained seq: {{range .Origins}}{{.Origin}} {{if .FirstSeq}}{{.FirstSeq}}{{else}}none{{end}}{{if .Truncated}} (dropped to {{.Truncated}}){{end}}; {{end}}</p>{{end}}
<table><tr><th class=l>subscription</th><th class=l>site</th><th>consumers</th><th>unacked</th><th>delivered</th><th>redelivered</th><th>dead-lettered</th></tr>
{{range .Subs}}<tr><td class=l>{{.Name}}</td><td class=l>{{.Site}}</td><td>{{.Consumers}}</td><td class="{{if .Unacked}}behind{{end}}">{{.Unacked}}</td><td>{{.Delivered}}</td><td>{{.Redelivered}}</td><td>{{.DeadLetter}}</td></tr>
{{else}}<tr><td class=l colspan=7>no subscriptions</td></tr>{{end}}
</table>
{{else}}<p>No topics yet.</p>{{end}}
<h2>Shares</h2>
{{if .Shares}}<table><tr><th class=l>share</th><th class=l>visibility</th><th>files shown</th><th>versions here</th><th>pending stability</th><th>conflicts</th></tr>
{{range .Shares}}<tr><td class=l>{{.Name}}</td><td class=l><code>{{.Visibility}}</code></td><td>{{.Paths}}</td><td>{{.Versions}}</td><td class="{{if .Pending}}behind{{end}}">{{.Pending}}</td><td class="{{if .Conflicts}}behind{{end}}">{{.Conflicts}}</td></tr>{{end}}
</table>{{else}}<p>No shares yet.</p>{{end}}
<p>File chunks: {{.Chunks}}</p>
</body></html>
`))

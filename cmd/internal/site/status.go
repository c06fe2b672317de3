package site

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// statusView is what the status page and status.json show. Tools read
// status.json (test/bench's wanbench: Sites, Streams, Retention,
// DiskTotal, Transfers): fields are added, never renamed.
type statusView struct {
	Site      string
	Sites     []string
	Connected map[string]bool
	Uptime    string
	Disk      stabilizer.DiskStatus
	// Now is when the view was taken (RFC 3339); Links, every site with
	// its connection and measured round trip, this one first; Stalled,
	// the frontiers below their head that have not moved for StallAfter,
	// with what they wait for.
	Now        string
	Links      []linkView
	LinksUp    int // peers connected
	LinksTotal int // peers
	Stalled    []stalledView
	StallAfter string
	Streams    []streamView
	Preds      []predView
	Topics     []topicView
	Shares     []fileshare.ShareStatus
	Chunks     fileshare.GCStats // the chunk collector's last pass
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
	InFlight                uint64 // delivered, waiting for the consumer's reply
	Redelivered, DeadLetter uint64
}

type predView struct{ Name, Source string }

// linkView is one site as this site sees it.
type linkView struct {
	Site      string
	Self      bool // this site
	Connected bool
	// RTT is the measured round trip as text ("" when none), RTTSeconds
	// the same smoothed value, LastRTTSeconds the latest sample.
	RTT                        string
	RTTSeconds, LastRTTSeconds float64
	// Sent and Received count the protocol bytes exchanged with the site.
	SentBytes, ReceivedBytes uint64
	Sent, Received           string
}

// stalledView is a frontier below its head that has not moved for
// StallAfter.
type stalledView struct {
	Stream, Predicate string
	Frontier, Head    uint64
	For               string   // how long it has not moved
	WaitsFor          []string // per level read: the sites below the next seq, "persisted: eu-west-1=3"
}

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
	// LagSeconds: now minus the HLC of the frontier, 0 at the head (Lag,
	// as text); Stalled: below the head and unmoved for StallAfter, since
	// StalledFor, waiting on WaitsFor; History: the last samples, oldest
	// first, one per second.
	LagSeconds float64
	Lag        string
	Stalled    bool
	StalledFor string   `json:",omitempty"`
	WaitsFor   []string `json:",omitempty"`
	History    []point
	Spark      template.HTML `json:"-"`
}

func (s *Site) view(ctx context.Context) (statusView, error) {
	schema := s.node.Schema()
	now := time.Now()
	v := statusView{Site: s.cfg.Site, Sites: schema.Sites, Connected: s.node.Connected(),
		Uptime: time.Since(s.started).Round(time.Second).String(), Disk: s.node.DiskStatus(),
		Now: now.Format(time.RFC3339), StallAfter: s.console.StallAfter.String()}
	v.Links = s.linksView()
	for _, l := range v.Links[1:] {
		v.LinksTotal++
		if l.Connected {
			v.LinksUp++
		}
	}
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
			fv := s.frontierView(ctx, st, p.Name, now)
			sv.Frontiers = append(sv.Frontiers, fv)
			if fv.Stalled {
				v.Stalled = append(v.Stalled, stalledView{Stream: st.Stream.String(), Predicate: p.Name, Frontier: fv.Seq,
					Head: st.Head, For: fv.StalledFor, WaitsFor: fv.WaitsFor})
			}
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
	slices.SortFunc(v.Stalled, func(a, b stalledView) int {
		return cmp.Or(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Predicate, b.Predicate))
	})
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

// frontierView is one predicate's frontier on a stream: lag, history and,
// when stalled, what it waits for: at each level the predicate reads, the
// sites whose ack is below the next seq (as WaitFor's timeout error says).
func (s *Site) frontierView(ctx context.Context, st stabilizer.StreamStatus, pred string, now time.Time) frontierView {
	f := st.Frontiers[pred]
	since := s.uncovered.since(st, pred)
	fv := frontierView{Predicate: pred, Seq: f.Seq, Version: f.Version, Behind: st.Head - min(f.Seq, st.Head),
		LagSeconds: lagSeconds(f, st.Head, since, now)}
	fv.Lag = secondsText(fv.LagSeconds)
	if fv.Behind > 0 && f.HLC.Wall <= 0 {
		fv.Lag = "—" // nothing stable yet: no time to measure from
	}
	pts, moved := s.hist.get(st.Stream, pred)
	fv.History = pts
	// Stalled since the frontier last moved, or since the first write it
	// does not cover arrived, whichever is later: a frontier idle for an
	// hour that a write 20 s ago is waiting on has stalled for 20 s.
	if since.After(moved) {
		moved = since
	}
	if fv.Behind > 0 && !moved.IsZero() && now.Sub(moved) >= s.console.StallAfter {
		fv.Stalled = true
		fv.StalledFor = now.Sub(moved).Round(time.Second).String()
		for _, l := range s.node.PredicateAcks(ctx, pred, st.Acks) {
			if below := l.Below(f.Seq + 1); len(below) > 0 {
				fv.WaitsFor = append(fv.WaitsFor, l.Level+": "+strings.Join(below, " "))
			}
		}
	}
	fv.Spark = sparkline(pts, fv.Stalled)
	return fv
}

// linksView lists every site, this one first, with what this site knows
// of its link to it.
func (s *Site) linksView() []linkView {
	out := []linkView{{Site: s.cfg.Site, Self: true, Connected: true}}
	for _, p := range s.node.Peers() {
		l := linkView{Site: p.Site, Connected: p.Connected, RTTSeconds: p.RTT.Seconds(), LastRTTSeconds: p.LastRTT.Seconds(),
			SentBytes: p.SentBytes, ReceivedBytes: p.ReceivedBytes, Sent: bytesText(p.SentBytes), Received: bytesText(p.ReceivedBytes)}
		if p.RTT > 0 {
			l.RTT = rttText(p.RTT)
		}
		out = append(out, l)
	}
	return out
}

func rttText(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
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
			tv.Subs = append(tv.Subs, subView{Name: name, Site: sub.Site, Consumers: sub.Consumers, Unacked: max(sub.Stats.Pending, sub.Backlog), InFlight: sub.Stats.InFlight,
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

//go:embed console.html
var consoleHTML string

// page is the console: one template, its CSS inline, no external assets;
// a little script refreshes it in place, and without script it reloads.
var page = template.Must(template.New("console").Parse(consoleHTML))

package core_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// TestInteraction drives in-memory cores through the scripts in
// testdata/interaction and prints every Ready. Regenerate with
// go test ./stabilizer/core -run TestInteraction -rewrite, then read the diff.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata/interaction", func(t *testing.T, path string) {
		var c *ddCluster
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "init" {
				c = newDDCluster(t, d)
				return ""
			}
			if c == nil {
				t.Fatalf("%s: init first", d.Pos)
			}
			return c.run(t, d)
		})
	})
}

type ddSite struct {
	name  string
	core  *core.Core
	store *simStore
	up    bool
}

type ddCluster struct {
	schema *frontier.Schema
	cfg    core.Config
	sites  []*ddSite
	queue  []core.Message // in flight, in send order
	now    int64
	out    *strings.Builder
}

func newDDCluster(t *testing.T, d *datadriven.TestData) *ddCluster {
	var names []string
	d.ScanArgs(t, "sites", &names)
	c := &ddCluster{
		schema: &frontier.Schema{Sites: names, Levels: []string{"verified"}},
		cfg: core.Config{
			HeartbeatInterval: 1000, FullAckInterval: 1000, ResendTicks: 1000, RelayDelay: 1000,
		},
	}
	d.MaybeScanArgs(t, "inflight", &c.cfg.MaxInflightBytes)
	d.MaybeScanArgs(t, "batch", &c.cfg.MaxBatchBytes)
	d.MaybeScanArgs(t, "memory", &c.cfg.MaxMemoryBytes)
	d.MaybeScanArgs(t, "heartbeat", &c.cfg.HeartbeatInterval)
	d.MaybeScanArgs(t, "unapplied", &c.cfg.MaxUnapplied)
	d.MaybeScanArgs(t, "relay", &c.cfg.RelayDelay)
	c.cfg.Schema = c.schema
	for _, n := range names {
		s := &ddSite{name: n, store: newStore()}
		c.sites = append(c.sites, s)
		c.start(t, s)
	}
	return c
}

func (c *ddCluster) start(t *testing.T, s *ddSite) {
	cfg := c.cfg
	cfg.Site = s.name
	cfg.Storage = s.store
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	cr, err := core.New(cfg, s.store.state())
	if err != nil {
		t.Fatal(err)
	}
	s.core, s.up = cr, true
}

func (c *ddCluster) site(t *testing.T, d *datadriven.TestData, key string) *ddSite {
	var name string
	d.ScanArgs(t, key, &name)
	for _, s := range c.sites {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("%s: no site %q", d.Pos, name)
	return nil
}

func streamArg(t *testing.T, d *datadriven.TestData) core.StreamID {
	var s string
	d.ScanArgs(t, "stream", &s)
	o, n, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("%s: stream %q is not origin/name", d.Pos, s)
	}
	return core.StreamID{Origin: o, Name: n}
}

func (c *ddCluster) printf(format string, args ...any) { fmt.Fprintf(c.out, format, args...) }

func (c *ddCluster) errf(err error) {
	if err != nil {
		c.printf("error: %v\n", err)
	}
}

func (c *ddCluster) run(t *testing.T, d *datadriven.TestData) string {
	c.out = &strings.Builder{}
	switch d.Cmd {
	case "append":
		s := c.site(t, d, "site")
		var stream, payload string
		d.ScanArgs(t, "stream", &stream)
		d.ScanArgs(t, "payload", &payload)
		seq, hlc, err := s.core.Append(stream, []byte(payload))
		c.errf(err)
		if err == nil {
			c.printf("%s/%s#%d@%s\n", s.name, stream, seq, fmtHLC(hlc))
		}
	case "ready":
		for _, s := range c.selected(t, d) {
			c.ready(s, !d.HasArg("quiet"))
		}
	case "deliver":
		c.deliver(t, d)
	case "stabilize":
		for i := 0; ; i++ {
			if i > 1000 {
				t.Fatalf("%s: does not stabilize", d.Pos)
			}
			busy := false
			for _, s := range c.sites {
				if s.up && s.core.HasReady() {
					c.ready(s, d.HasArg("verbose"))
					busy = true
				}
			}
			if len(c.queue) > 0 {
				c.deliverAll(d.HasArg("verbose"))
				busy = true
			}
			if !busy {
				break
			}
		}
		if !d.HasArg("verbose") {
			c.printf("ok\n")
		}
	case "tick":
		n := 1
		d.MaybeScanArgs(t, "n", &n)
		for range n {
			c.now += 1e6
			for _, s := range c.sites {
				if s.up {
					s.core.Tick(c.now)
				}
			}
		}
		c.printf("now %d ms\n", c.now/1e6)
	case "connect", "disconnect":
		var names []string
		d.ScanArgs(t, "sites", &names)
		for _, a := range names {
			for _, b := range names {
				s := c.byName(t, a)
				if a == b || !s.up {
					continue
				}
				if d.Cmd == "connect" {
					c.errf(s.core.Connected(b))
				} else {
					c.errf(s.core.Disconnected(b))
				}
			}
		}
		if d.Cmd == "disconnect" {
			// A broken connection loses what was in flight on it.
			c.queue = slices.DeleteFunc(c.queue, func(m core.Message) bool {
				return slices.Contains(names, m.From) && slices.Contains(names, m.To)
			})
		}
		c.printf("ok\n")
	case "deliver-rejection":
		// b answers a's Hello as a site with another schema would.
		var from, to string
		d.ScanArgs(t, "from", &from)
		d.ScanArgs(t, "to", &to)
		var hello *core.Message
		for i := range c.queue {
			if c.queue[i].Type == core.MsgHello && c.queue[i].From == to && c.queue[i].To == from {
				hello = &c.queue[i]
			}
		}
		if hello == nil {
			t.Fatalf("%s: no Hello from %s to %s in flight", d.Pos, to, from)
		}
		err := c.byName(t, to).core.Step(core.Message{
			Type: core.MsgReject, From: from, To: to, Session: hello.Session,
			Version: core.ProtocolVersion, Reason: "schema mismatch (test)",
		})
		c.printf("error is ErrRejected=%v\n", errors.Is(err, core.ErrRejected))
		c.errf(err)
	case "connect-peer":
		s := c.site(t, d, "site")
		var peer string
		d.ScanArgs(t, "peer", &peer)
		err := s.core.Connected(peer)
		c.printf("error is ErrUnknownPeer=%v\n", errors.Is(err, core.ErrUnknownPeer))
		c.errf(err)
	case "crash":
		s := c.site(t, d, "site")
		s.up, s.core = false, nil
		c.queue = slices.DeleteFunc(c.queue, func(m core.Message) bool { return m.From == s.name || m.To == s.name })
		for _, o := range c.sites {
			if o.up {
				c.errf(o.core.Disconnected(s.name))
			}
		}
		c.printf("ok\n")
	case "restart":
		s := c.site(t, d, "site")
		c.start(t, s)
		c.status(s)
	case "status":
		for _, s := range c.selected(t, d) {
			c.status(s)
		}
	case "set-predicate":
		s := c.site(t, d, "site")
		var name string
		d.ScanArgs(t, "name", &name)
		v, err := s.core.SetPredicate(name, strings.TrimSpace(d.Input))
		c.errf(err)
		if err == nil {
			c.printf("%s version %d\n", name, v)
		}
	case "apply":
		s := c.site(t, d, "site")
		var seq uint64
		d.ScanArgs(t, "seq", &seq)
		c.errf(s.core.Applied(streamArg(t, d), seq))
		c.printf("ok\n")
	case "report":
		s := c.site(t, d, "site")
		var seq uint64
		var level string
		d.ScanArgs(t, "seq", &seq)
		d.ScanArgs(t, "level", &level)
		c.errf(s.core.Report(streamArg(t, d), level, seq))
		c.printf("ok\n")
	case "step":
		// A hand-made message, for the error paths.
		s := c.site(t, d, "site")
		m := core.Message{To: s.name, Version: core.ProtocolVersion, Schema: core.SchemaFingerprint(c.schema)}
		var typ string
		d.ScanArgs(t, "from", &m.From)
		d.ScanArgs(t, "type", &typ)
		d.MaybeScanArgs(t, "version", &m.Version)
		d.MaybeScanArgs(t, "schema", &m.Schema)
		switch typ {
		case "hello":
			m.Type = core.MsgHello
		case "acks":
			m.Type = core.MsgAcks
		default:
			t.Fatalf("%s: type %q", d.Pos, typ)
		}
		err := s.core.Step(m)
		c.printf("error is ErrVersionMismatch=%v ErrSchemaMismatch=%v ErrUnknownPeer=%v\n",
			errors.Is(err, core.ErrVersionMismatch), errors.Is(err, core.ErrSchemaMismatch), errors.Is(err, core.ErrUnknownPeer))
		c.errf(err)
	case "define-transient":
		s := c.site(t, d, "site")
		var name string
		d.ScanArgs(t, "name", &name)
		p, err := frontier.Compile(strings.TrimSpace(d.Input), c.schema)
		if err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		fresh, err := s.core.DefineTransient(name, p)
		c.errf(err)
		if err == nil {
			c.printf("%s fresh=%v\n", name, fresh)
		}
	case "scope":
		// stream=* scopes to every stream.
		s := c.site(t, d, "site")
		var pred, stream string
		d.ScanArgs(t, "pred", &pred)
		d.ScanArgs(t, "stream", &stream)
		if stream == "*" {
			stream = core.AllStreams
		}
		c.errf(s.core.ScopeTransient(pred, stream))
		c.printf("ok\n")
	case "remove-transient":
		s := c.site(t, d, "site")
		var pred string
		d.ScanArgs(t, "pred", &pred)
		c.errf(s.core.RemoveTransient(pred))
		c.printf("ok\n")
	case "stable-time":
		s := c.site(t, d, "site")
		var pred string
		d.ScanArgs(t, "pred", &pred)
		st, err := s.core.StableTime(pred)
		c.errf(err)
		if err == nil {
			c.printf("%s %s\n", pred, fmtHLC(st))
		}
	case "evaluated":
		s := c.site(t, d, "site")
		var name string
		d.ScanArgs(t, "name", &name)
		c.printf("%d of %d predicates on streams named %s\n", s.core.NumEvaluated(name), s.core.NumPredicates(), name)
	case "frontier":
		s := c.site(t, d, "site")
		var pred string
		d.ScanArgs(t, "pred", &pred)
		f, err := s.core.Frontier(streamArg(t, d), pred)
		c.errf(err)
		if err == nil {
			c.printf("%s %s = %d (v%d)\n", f.Stream, f.Predicate, f.Seq, f.Version)
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	return c.out.String()
}

func (c *ddCluster) byName(t *testing.T, name string) *ddSite {
	for _, s := range c.sites {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no site %q", name)
	return nil
}

func (c *ddCluster) selected(t *testing.T, d *datadriven.TestData) []*ddSite {
	if d.HasArg("site") {
		return []*ddSite{c.site(t, d, "site")}
	}
	var up []*ddSite
	for _, s := range c.sites {
		if s.up {
			up = append(up, s)
		}
	}
	return up
}

// ready handles one Ready of s like a driver: persist, send, deliver
// (delivered entries are printed; the script applies them), Advance.
func (c *ddCluster) ready(s *ddSite, print bool) {
	if !s.up || !s.core.HasReady() {
		return
	}
	rd := s.core.Ready()
	st := s.store
	for _, e := range rd.Entries {
		st.log[e.Stream] = append(st.log[e.Stream], e)
	}
	for _, a := range rd.Acks {
		st.acks[akey{a.Stream, a.Level}] = a
	}
	for _, p := range rd.Predicates {
		st.preds[p.Name] = p
	}
	for _, f := range rd.Frontiers {
		if strings.HasPrefix(f.Predicate, "=") {
			continue // transient: not stored
		}
		st.fronts[fkey{f.Stream, f.Predicate}] = core.FrontierState{Stream: f.Stream, Predicate: f.Predicate, Seq: f.To, Version: f.Version, HLC: f.HLC}
	}
	for _, t := range rd.StableTimes {
		if !strings.HasPrefix(t.Predicate, "=") {
			st.stable[t.Predicate] = t
		}
	}
	if !rd.Clock.IsZero() {
		st.clock = rd.Clock
	}
	c.queue = append(c.queue, rd.Messages...)
	if print && !rd.Empty() {
		c.printReady(s.name, rd)
	}
	s.core.Advance()
}

func (c *ddCluster) printReady(site string, rd core.Ready) {
	sync := ""
	if rd.MustSync {
		sync = " (sync)"
	}
	c.printf("%s: ready%s\n", site, sync)
	if len(rd.Entries) > 0 {
		c.printf("  persist %s\n", fmtEntries(rd.Entries))
	}
	if len(rd.Acks) > 0 {
		c.printf("  acks %s\n", fmtCells(c.schema, rd.Acks))
	}
	for _, p := range rd.Predicates {
		c.printf("  predicate %s v%d = %s\n", p.Name, p.Version, p.Source)
	}
	if len(rd.Scoped) > 0 {
		var b []string
		for _, sc := range rd.Scoped {
			b = append(b, sc.String())
		}
		c.printf("  scoped %s\n", strings.Join(b, " "))
	}
	if len(rd.Frontiers) > 0 {
		var b []string
		for _, f := range rd.Frontiers {
			b = append(b, fmt.Sprintf("%s %s %d->%d v%d", f.Stream, f.Predicate, f.From, f.To, f.Version))
		}
		c.printf("  frontiers %s\n", strings.Join(b, ", "))
	}
	if len(rd.StableTimes) > 0 {
		var b []string
		for _, st := range rd.StableTimes {
			b = append(b, fmt.Sprintf("%s=%s", st.Predicate, fmtHLC(st.Time)))
		}
		c.printf("  stable times %s\n", strings.Join(b, " "))
	}
	for _, m := range rd.Messages {
		c.printf("  send %s\n", fmtMsg(c.schema, m))
	}
	if len(rd.Deliver) > 0 {
		c.printf("  deliver %s\n", fmtEntries(rd.Deliver))
	}
	for _, err := range rd.Errors {
		c.printf("  error %v\n", err)
	}
}

func (c *ddCluster) deliver(t *testing.T, d *datadriven.TestData) {
	var from, to string
	d.MaybeScanArgs(t, "from", &from)
	d.MaybeScanArgs(t, "to", &to)
	drop := d.HasArg("drop")
	limit := len(c.queue)
	d.MaybeScanArgs(t, "n", &limit)
	var keep []core.Message
	var now []core.Message
	for _, m := range c.queue {
		if (from == "" || m.From == from) && (to == "" || m.To == to) && len(now) < limit {
			now = append(now, m)
		} else {
			keep = append(keep, m)
		}
	}
	c.queue = keep
	for _, m := range now {
		if drop {
			c.printf("drop %s\n", fmtMsg(c.schema, m))
			continue
		}
		c.step(m, true)
	}
}

func (c *ddCluster) deliverAll(print bool) {
	q := c.queue
	c.queue = nil
	for _, m := range q {
		c.step(m, print)
	}
}

func (c *ddCluster) step(m core.Message, print bool) {
	for _, s := range c.sites {
		if s.name == m.To && s.up {
			if print {
				c.printf("%s <- %s\n", m.To, fmtMsg(c.schema, m))
			}
			if err := s.core.Step(m); err != nil {
				c.printf("  error: %v\n", err)
			}
		}
	}
}

func (c *ddCluster) status(s *ddSite) {
	c.printf("%s:\n", s.name)
	n := len(c.schema.Sites)
	for _, id := range s.core.Streams() {
		head, persisted, _ := s.core.Head(id)
		acks, _ := s.core.Acks(id)
		c.printf("  %s head=%d persisted=%d\n", id, head, persisted)
		for l, name := range c.schema.LevelNames() {
			c.printf("    %-9s %v\n", name, acks[l*n:(l+1)*n])
		}
		var fs []string
		for _, p := range s.core.Predicates() {
			f, _ := s.core.Frontier(id, p.Name)
			fs = append(fs, fmt.Sprintf("%s=%d", p.Name, f.Seq))
		}
		c.printf("    frontiers %s\n", strings.Join(fs, " "))
	}
}

func fmtHLC(h core.HLC) string { return fmt.Sprintf("%d.%d", h.Wall/1e6, h.Logical) }

func fmtEntries(es []core.Entry) string {
	var b []string
	for _, e := range es {
		b = append(b, fmt.Sprintf("%s#%d", e.Stream, e.Seq))
	}
	return strings.Join(b, " ")
}

func fmtCells(schema *frontier.Schema, cells []core.AckCell) string {
	var b []string
	names := schema.LevelNames()
	for _, a := range cells {
		b = append(b, fmt.Sprintf("%s.%s=%d", a.Stream, names[a.Level], a.Seq))
	}
	return strings.Join(b, " ")
}

func fmtMsg(schema *frontier.Schema, m core.Message) string {
	s := fmt.Sprintf("%s->%s %s", m.From, m.To, m.Type)
	switch m.Type {
	case core.MsgData:
		s += " " + fmtEntries(m.Entries)
	case core.MsgPositions:
		var b []string
		for _, p := range m.Positions {
			b = append(b, fmt.Sprintf("%s@%d", p.Stream, p.Seq))
		}
		s += " [" + strings.Join(b, " ") + "]"
	case core.MsgAcks:
		if !m.Clock.IsZero() {
			var b []string
			for _, h := range m.Heads {
				b = append(b, fmt.Sprintf("%s@%d", h.Stream, h.Seq))
			}
			s += fmt.Sprintf(" heartbeat=%s heads=[%s]", fmtHLC(m.Clock), strings.Join(b, " "))
		}
		s += " " + fmtCells(schema, m.Cells)
	case core.MsgReject:
		s += " " + m.Reason
	}
	return s
}

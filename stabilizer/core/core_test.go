package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

func TestConfigValidateReportsEveryField(t *testing.T) {
	cfg := core.Config{
		Site:        "zz",
		Schema:      &frontier.Schema{Sites: []string{"a", "a"}},
		Predicates:  map[string]string{"all": "min(persisted(sites))"},
		AckInterval: -1, MaxBatchBytes: -5,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{`Site: "zz" is not one of`, "duplicate site", "Storage: missing",
		"AckInterval: -1", "MaxBatchBytes: -5", `Predicates["all"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, core.ErrBuiltinPredicate) {
		t.Errorf("error does not wrap ErrBuiltinPredicate: %v", err)
	}
	if _, err := core.New(cfg, core.State{}); err == nil {
		t.Error("New accepted an invalid config")
	}
}

func TestNewRefusesBadState(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a", "b"}}
	cfg := core.Config{Site: "a", Schema: schema, Storage: newStore()}
	id := core.StreamID{Origin: "b", Name: "s"}
	for name, st := range map[string]core.State{
		"applied beyond persisted": {Heads: []core.Position{{Stream: id, Seq: 3}}, Applied: []core.Position{{Stream: id, Seq: 4}}},
		"unknown origin":           {Heads: []core.Position{{Stream: core.StreamID{Origin: "x", Name: "s"}, Seq: 1}}},
		"bad predicate":            {Predicates: []core.PredicateDef{{Name: "p", Source: "persisted(nowhere)", Version: 2}}},
		"builtin redefined":        {Predicates: []core.PredicateDef{{Name: "all", Source: "persisted(origin)", Version: 2}}},
		"level out of range":       {Acks: []core.AckCell{{Stream: id, Site: "a", Level: 9, Seq: 1}}},
	} {
		if _, err := core.New(cfg, st); !errors.Is(err, core.ErrBadState) {
			t.Errorf("%s: got %v, want ErrBadState", name, err)
		}
	}
}

// TestHeartbeatBoundsStableTime pins the rule that an origin's stable time
// never passes the clock it persisted with its heads: an entry appended
// while a Ready is handled gets a timestamp above that clock but is not
// among the heads, so it must not count as stable before the predicate
// covers it.
func TestHeartbeatBoundsStableTime(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a"}}
	st := newStore()
	a, err := core.New(core.Config{
		Site: "a", Schema: schema, Storage: st, HeartbeatInterval: 5, ClockReserve: 1,
		Predicates: map[string]string{"applied": "min(applied(sites))"},
	}, core.State{})
	if err != nil {
		t.Fatal(err)
	}
	id := core.StreamID{Origin: "a", Name: "s"}
	now := int64(0)
	run := func() (delivered []core.Entry) {
		for a.HasReady() {
			rd := a.Ready()
			for _, e := range rd.Entries {
				st.log[e.Stream] = append(st.log[e.Stream], e)
			}
			delivered = append(delivered, rd.Deliver...)
			a.Advance()
		}
		return delivered
	}
	if _, _, err := a.Append("s", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if d := run(); len(d) != 1 {
		t.Fatalf("delivered %v", d)
	}
	if err := a.Applied(id, 1); err != nil {
		t.Fatal(err)
	}
	run()
	if f, _ := a.Frontier(id, "applied"); f.Seq != 1 {
		t.Fatalf("applied frontier = %d, want 1", f.Seq)
	}
	for range 5 {
		now += 1e6
		a.Tick(now)
	}
	rd := a.Ready()
	if rd.Clock.IsZero() {
		t.Fatal("no heartbeat due")
	}
	// Appended while the heartbeat's Ready is handled: not among its heads.
	_, h2, err := a.Append("s", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	a.Advance()
	run()
	stable, err := a.StableTime("applied")
	if err != nil {
		t.Fatal(err)
	}
	if !stable.Less(h2) {
		t.Errorf("stable time under applied is %s, not below unapplied seq 2's %s", stable, h2)
	}
	if err := a.Applied(id, 2); err != nil {
		t.Fatal(err)
	}
	// A heartbeat, then a tick: stable times are computed once per tick.
	for range 6 {
		now += 1e6
		a.Tick(now)
		run()
	}
	if stable, _ := a.StableTime("applied"); stable.Less(h2) {
		t.Errorf("stable time under applied is %s after seq 2 was applied and a heartbeat passed, want at least %s", stable, h2)
	}
}

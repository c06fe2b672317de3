package lin

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range []command{
		{op: opPut, origin: "us-east-1", id: 7, key: "job/1", value: []byte("queued")},
		{op: opDelete, origin: "eu-west-1", id: 1 << 60, key: "job/1", cond: IfVersion(12)},
		{op: opPut, origin: "a", id: 1, key: "k", value: []byte("v"), cond: IfValue([]byte("old"))},
		{op: opPut, origin: "a", id: 1, key: "k", cond: IfLeaseHeld("job/1", 3)},
		{op: opGrant, origin: "a", id: 2, key: "job/1", holder: "eu-west-1", ttl: 30 * time.Second},
		{op: opRenew, origin: "a", id: 3, key: "job/1", holder: "eu-west-1", token: 4},
		{op: opExpire, origin: "a", key: "job/1", rev: 99},
	} {
		got, err := decodeCommand(c.encode())
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got.op != c.op || got.origin != c.origin || got.id != c.id || got.key != c.key || !bytes.Equal(got.value, c.value) ||
			got.cond.kind != c.cond.kind || got.cond.version != c.cond.version || !bytes.Equal(got.cond.value, c.cond.value) ||
			got.cond.job != c.cond.job || got.cond.token != c.cond.token || got.holder != c.holder || got.ttl != c.ttl ||
			got.token != c.token || got.rev != c.rev {
			t.Errorf("round trip of %+v gave %+v", c, got)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add((&command{op: opPut, origin: "a", id: 1, key: "k", value: []byte("v")}).encode())
	f.Add((&command{op: opGrant, origin: "a", id: 2, key: "job", holder: "h", ttl: time.Second}).encode())
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		if again, err := decodeCommand(c.encode()); err != nil || again.key != c.key || again.op != c.op {
			t.Fatalf("re-decode: %+v, %v", again, err)
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	s := newFSM()
	s.apply(5, command{op: opPut, key: "k", value: []byte("v")}, time.Now())
	s.apply(6, command{op: opGrant, key: "job", holder: "h", ttl: time.Second}, time.Now())
	f.Add(s.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeFSM(b, time.Now())
	})
}

func TestConfigValidate(t *testing.T) {
	err := Config{Site: "x", Voters: []string{"a", "a", ""}, Preferred: "z", HeartbeatTicks: 5, ElectionTicks: 5, TickInterval: -1}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Site: \"x\" is not one of", "\"a\" listed twice", "empty site name", "Preferred: \"z\"", "Namespace: missing", "Transport: missing", "TickInterval: -1ns", "ElectionTicks: 5 must exceed HeartbeatTicks 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		err  error
		is   error
		want string
	}{
		{&NoLeaderError{Site: "eu-west-1", LastLeader: "us-east-1", Term: 4}, ErrNoLeader,
			"lin: no leader at eu-west-1 (last known leader us-east-1, term 4); are a majority of the voters up and reachable?"},
		{&NoQuorumError{Leader: "us-east-1", Term: 3, Reachable: []string{"us-east-1"}, Unreachable: []string{"ap-south-1", "eu-west-1"}, Need: 2}, ErrNoQuorum,
			"lin: leader us-east-1 (term 3) reaches 1 of 3 voters, needs 2: reachable us-east-1, unreachable ap-south-1, eu-west-1"},
		{&CompareError{Key: "job/7", Cond: IfVersion(12), Exists: true, Version: 15, Value: []byte("running")}, ErrCompareFailed,
			`lin: compare failed on "job/7": want version 12, have version 15 value "running"`},
		{&CompareError{Key: "job/7", Cond: IfValue([]byte("queued"))}, ErrCompareFailed,
			`lin: compare failed on "job/7": want value "queued", the key does not exist`},
		{&LeaseError{Op: "grant", Job: "job/7", Holder: "ap-south-1", Current: Lease{Holder: "eu-west-1", Token: 3, Remaining: 1500 * time.Millisecond}, err: ErrLeaseHeld}, ErrLeaseHeld,
			`lin: grant lease "job/7" for ap-south-1: held by eu-west-1 with token 3, expires in about 1.5s unless renewed`},
		{&LeaseError{Op: "renew", Job: "job/7", Holder: "ap-south-1", Token: 2, Current: Lease{}, err: ErrLeaseLost}, ErrLeaseLost,
			`lin: renew lease "job/7" for ap-south-1 with token 2: lease not held: nobody holds it`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%v is not %v", tc.err, tc.is)
		}
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"
)

// agentEvent is one line of an agent's event file: what the agent did and
// when, read by the scenario to check the run and print its timeline. The
// file is appended with one write(2) per event, so a kill -9 leaves every
// event the agent finished recording.
type agentEvent struct {
	T      int64  `json:"t"` // Unix nanoseconds
	Ev     string `json:"ev"`
	Region string `json:"region,omitempty"`
	Step   int    `json:"step,omitempty"`
	Shard  int    `json:"shard,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Key    string `json:"key,omitempty"`
	ID     string `json:"id,omitempty"`
	Early  bool   `json:"early,omitempty"`
	Err    string `json:"err,omitempty"`
	Note   string `json:"note,omitempty"`
}

func (e agentEvent) at() time.Time { return time.Unix(0, e.T) }

// eventLog appends agentEvents to a file.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

func openEventLog(path string) (*eventLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventLog{f: f}, nil
}

func (l *eventLog) emit(e agentEvent) {
	if e.T == 0 {
		e.T = time.Now().UnixNano()
	}
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(b, '\n'))
}

func (l *eventLog) Close() error { return l.f.Close() }

// readEvents returns the events of a file so far; a missing file has none.
// A last line cut short by a kill is ignored.
func readEvents(path string) ([]agentEvent, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []agentEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e agentEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// find returns the first event named ev that match accepts.
func find(evs []agentEvent, ev string, match func(agentEvent) bool) (agentEvent, bool) {
	for _, e := range evs {
		if e.Ev == ev && (match == nil || match(e)) {
			return e, true
		}
	}
	return agentEvent{}, false
}

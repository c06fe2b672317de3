package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// state is what `up` leaves in DIR/wanbed.json so that later commands find
// the processes it started (by PID) and the WAN's control address.
type state struct {
	Topology string      `json:"topology"`
	Started  time.Time   `json:"started"`
	Sites    []siteState `json:"sites"`
	WAN      wanState    `json:"wan"`
	// Agents are the processes a scenario started beside the sites
	// (schedulers, trainers, stabsync); down stops them first.
	Agents []agentState `json:"agents,omitempty"`
}

type agentState struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`
}

type siteState struct {
	Site   string `json:"site"`
	Config string `json:"config"`
	Client string `json:"client"`
	HTTP   string `json:"http"`
	PID    int    `json:"pid"`
	Log    string `json:"log"`
}

type wanState struct {
	PID     int     `json:"pid"`
	Control string  `json:"control"`
	Log     string  `json:"log"`
	Routes  []route `json:"routes"`
}

// route is one proxy: connections from site From to site To's Plane
// address go to Listen and are forwarded to Target over the From->To link.
type route struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Plane  string `json:"plane"`
	Target string `json:"target"`
	Listen string `json:"listen,omitempty"`
}

func statePath(dir string) string { return filepath.Join(dir, "wanbed.json") }

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no testbed in %s (start one with: wanbed up --dir %s)", dir, dir)
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(dir), err)
	}
	return &s, nil
}

func saveState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir))
}

// alive reports whether a process runs under pid (signal 0 probes it).
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid)
}

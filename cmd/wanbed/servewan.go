package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/wan"
)

// linkView is a link as the control API shows and takes it.
type linkView struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	DelayMs   float64 `json:"delay_ms"`
	JitterMs  float64 `json:"jitter_ms"`
	Bandwidth string  `json:"bandwidth"`
	Loss      float64 `json:"loss"`
	Cut       bool    `json:"cut"`
}

// linkChange is a request to change one directed link; nil fields stay.
type linkChange struct {
	DelayMs   *float64 `json:"delay_ms,omitempty"`
	JitterMs  *float64 `json:"jitter_ms,omitempty"`
	Bandwidth *string  `json:"bandwidth,omitempty"`
	Loss      *float64 `json:"loss,omitempty"`
	Cut       *bool    `json:"cut,omitempty"`
}

// serveWAN is the process that holds the emulated links: it reads the
// routes from DIR/routes.json, starts a proxy for each, writes their
// addresses and its control address to DIR/proxies.json and serves link
// changes until SIGTERM.
func serveWAN(dir, topoRef string) error {
	log := hclog.New(&hclog.LoggerOptions{Name: "wan", Level: hclog.Info, Output: os.Stderr})
	topo, err := wan.OpenTopology(topoRef)
	if err != nil {
		return err
	}
	var routes []route
	b, err := os.ReadFile(filepath.Join(dir, "routes.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &routes); err != nil {
		return err
	}
	n, err := wan.NewNetwork(wan.Config{Topology: topo, Logger: log})
	if err != nil {
		return err
	}
	defer n.Close()
	for i, r := range routes {
		l, err := n.Link(r.From, r.To)
		if err != nil {
			return err
		}
		p, err := l.Proxy(r.Target)
		if err != nil {
			return err
		}
		routes[i].Listen = p.Addr()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: controlAPI(n), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	out, _ := json.Marshal(struct {
		Control string  `json:"control"`
		Routes  []route `json:"routes"`
	}{ln.Addr().String(), routes})
	if err := os.WriteFile(filepath.Join(dir, "proxies.json"), out, 0o644); err != nil {
		return err
	}
	log.Info("links up", "proxies", len(routes), "control", ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

func viewOf(l *wan.Link) linkView {
	c := l.Config()
	return linkView{From: l.From(), To: l.To(), DelayMs: float64(c.Delay) / 1e6, JitterMs: float64(c.Jitter) / 1e6,
		Bandwidth: c.Bandwidth.String(), Loss: c.Loss, Cut: l.IsCut()}
}

func controlAPI(n *wan.Network) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /links", func(w http.ResponseWriter, r *http.Request) {
		var out []linkView
		for _, l := range n.Links() {
			out = append(out, viewOf(l))
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /links/{from}/{to}", func(w http.ResponseWriter, r *http.Request) {
		var ch linkChange
		if err := json.NewDecoder(r.Body).Decode(&ch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		l, err := n.Link(r.PathValue("from"), r.PathValue("to"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err := applyChange(l, ch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(viewOf(l))
	})
	return mux
}

func applyChange(l *wan.Link, ch linkChange) error {
	c := l.Config()
	if ch.DelayMs != nil {
		c.Delay = time.Duration(*ch.DelayMs * float64(time.Millisecond))
	}
	if ch.JitterMs != nil {
		c.Jitter = time.Duration(*ch.JitterMs * float64(time.Millisecond))
	}
	if ch.Bandwidth != nil {
		bw, err := wan.ParseBandwidth(*ch.Bandwidth)
		if err != nil {
			return err
		}
		c.Bandwidth = bw
	}
	if ch.Loss != nil {
		c.Loss = *ch.Loss
	}
	if err := l.Set(c); err != nil {
		return err
	}
	if ch.Cut != nil {
		if *ch.Cut {
			l.Cut()
		} else {
			l.Restore()
		}
	}
	return nil
}

// postLink sends a change of one directed link to the WAN process.
func postLink(control, from, to string, ch linkChange) (linkView, error) {
	b, _ := json.Marshal(ch)
	resp, err := http.Post(fmt.Sprintf("http://%s/links/%s/%s", control, from, to), "application/json", bytesReader(b))
	if err != nil {
		return linkView{}, fmt.Errorf("the WAN process at %s does not answer (is the testbed up? wanbed status): %w", control, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg [512]byte
		k, _ := resp.Body.Read(msg[:])
		return linkView{}, errors.New(string(msg[:k]))
	}
	var v linkView
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// isolate cuts (cut true) or restores every link to and from site, both
// directions: a region lost or back.
func isolate(control string, topo *wan.Topology, site string, cut bool) error {
	for _, s := range topo.Sites {
		if s == site {
			continue
		}
		for _, pair := range [][2]string{{s, site}, {site, s}} {
			if _, err := postLink(control, pair[0], pair[1], linkChange{Cut: &cut}); err != nil {
				return err
			}
		}
	}
	return nil
}

func getLinks(control string) ([]linkView, error) {
	resp, err := http.Get("http://" + control + "/links")
	if err != nil {
		return nil, fmt.Errorf("the WAN process at %s does not answer: %w", control, err)
	}
	defer resp.Body.Close()
	var out []linkView
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

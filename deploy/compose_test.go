package deploy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestCompose loads compose/compose.yaml as docker compose does (schema
// checked: an unknown field fails) and holds its services against the site
// configs they mount.
func TestCompose(t *testing.T) {
	wd, err := filepath.Abs("compose")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{WorkingDir: wd,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yaml")}}, Environment: types.Mapping{}},
		func(o *loader.Options) { o.SetProjectName("stabilizer", true) })
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(p.Services) != 3 {
		t.Fatalf("%d services, want 3", len(p.Services))
	}
	cfgs := map[string]siteConfig{}
	for name, s := range p.Services {
		i := slices.Index(s.Command, "--config")
		if i < 0 || i+1 >= len(s.Command) {
			t.Fatalf("service %s: command %q has no --config", name, s.Command)
		}
		var dataMount, configFile string
		for _, v := range s.Volumes {
			switch {
			case v.Type == types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("service %s mounts volume %s, which the file does not declare", name, v.Source)
				}
				dataMount = v.Target
			case v.Type == types.VolumeTypeBind && v.Target == s.Command[i+1]:
				configFile = v.Source
			}
		}
		if configFile == "" {
			t.Fatalf("service %s: no bind mount at %s, its --config", name, s.Command[i+1])
		}
		data, err := os.ReadFile(configFile)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, name+".yaml", data)
		cfg := parseSiteConfig(t, data)
		cfgs[name] = cfg
		if cfg.Site != name {
			t.Errorf("service %s runs site %s", name, cfg.Site)
		}
		if dataMount == "" || dataMount != filepath.Dir(cfg.DataDir) {
			t.Errorf("service %s: data volume at %q, data_dir %s (and its .snapshots) want it at %s", name, dataMount, cfg.DataDir, filepath.Dir(cfg.DataDir))
		}
		if s.HealthCheck == nil || !slices.Contains(s.HealthCheck.Test, "health") ||
			!slices.Contains(s.HealthCheck.Test, "http://127.0.0.1:"+strings.TrimPrefix(cfg.Listen.HTTP, ":")+"/healthz") {
			t.Errorf("service %s: healthcheck %v, want stabilizerd health on listen.http %s", name, s.HealthCheck, cfg.Listen.HTTP)
		}
		for _, want := range []string{cfg.Listen.Client, cfg.Listen.HTTP} {
			if !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == uint32(port(t, want)) && pc.Published != "" }) {
				t.Errorf("service %s does not publish port %s", name, want)
			}
		}
	}
	published := map[string]string{}
	for name, s := range p.Services {
		for _, pc := range s.Ports {
			if other, dup := published[pc.Published]; dup {
				t.Errorf("host port %s published by %s and %s", pc.Published, other, name)
			}
			published[pc.Published] = name
		}
		for _, peer := range cfgs[name].Sites {
			if peer.Name == name {
				continue
			}
			pcfg, ok := cfgs[peer.Name]
			if !ok {
				t.Errorf("%s lists site %s, which is no service", name, peer.Name)
				continue
			}
			for plane, addr := range map[string][2]string{"data": {peer.Data, pcfg.Listen.Data},
				"control": {peer.Control, pcfg.Listen.Control}, "client": {peer.Client, pcfg.Listen.Client}} {
				host, _, err := net.SplitHostPort(addr[0])
				if err != nil || host != peer.Name || port(t, addr[0]) != port(t, addr[1]) {
					t.Errorf("%s reaches %s's %s at %s; the service %s listens on %s", name, peer.Name, plane, addr[0], peer.Name, addr[1])
				}
			}
		}
	}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// Files under the state dir (safepath.StateDir) of a folder.
const (
	configFile = "config.json"
	indexFile  = "index.json"
	statusFile = "status.json"
	lockFile   = "lock"
	tmpDir     = "tmp"
)

// Defaults of Config.
const (
	DefaultSettleTime     = 2 * time.Second
	DefaultRescanInterval = time.Minute
	DefaultRetryInterval  = 2 * time.Second
)

// Duration is a time.Duration written as text ("2s") in the config file.
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what time.ParseDuration reads.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Config is a folder's sync configuration, kept in <folder>/.stabsync/config.json.
type Config struct {
	// Sites are client addresses of sites, the nearest first; the client
	// uses the first that answers and moves on when it is lost. Required.
	Sites []string `json:"sites"`
	// Share is the share the folder syncs. Required.
	Share string `json:"share"`
	// SettleTime is how long a file's size and mtime must stay the same
	// before it is published (default 2 s): a file being written is never
	// published half-way.
	SettleTime Duration `json:"settle_time,omitempty"`
	// RescanInterval is the period of full rescans beside notifications
	// (default 1 min).
	RescanInterval Duration `json:"rescan_interval,omitempty"`
	// RetryInterval is how soon a round runs again after a failure or when
	// chunks have not arrived at the site yet (default 2 s).
	RetryInterval Duration `json:"retry_interval,omitempty"`
	// CaseInsensitive says the folder's filesystem folds case: set by Init
	// from a probe file.
	CaseInsensitive bool `json:"case_insensitive,omitempty"`
}

// Validate reports every bad field with its value.
func (c Config) Validate() error {
	var bad []string
	if len(c.Sites) == 0 {
		bad = append(bad, "no site address")
	}
	for i, a := range c.Sites {
		if err := checkAddr(a); err != nil {
			bad = append(bad, fmt.Sprintf("site %d %q: %v", i+1, a, err))
		}
	}
	if c.Share == "" {
		bad = append(bad, "no share name")
	} else if strings.ContainsAny(c.Share, "/\x00") {
		bad = append(bad, fmt.Sprintf("share %q: no / or NUL allowed", c.Share))
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"settle_time", c.SettleTime}, {"rescan_interval", c.RescanInterval}, {"retry_interval", c.RetryInterval}} {
		if d.v < 0 {
			bad = append(bad, fmt.Sprintf("%s %s: want >= 0", d.name, time.Duration(d.v)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("client: config: %s", strings.Join(bad, "; "))
	}
	return nil
}

// checkAddr accepts host:port with a numeric port.
func checkAddr(a string) error {
	i := strings.LastIndex(a, ":")
	if i <= 0 || i == len(a)-1 {
		return errors.New("want host:port")
	}
	for _, r := range a[i+1:] {
		if r < '0' || r > '9' {
			return errors.New("port is not a number")
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.SettleTime == 0 {
		c.SettleTime = Duration(DefaultSettleTime)
	}
	if c.RescanInterval == 0 {
		c.RescanInterval = Duration(DefaultRescanInterval)
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = Duration(DefaultRetryInterval)
	}
	return c
}

// Share is a share's definition at the sites.
type Share struct {
	Name string `json:"name"`
	// Visibility is the predicate under which versions become visible
	// elsewhere (default majority).
	Visibility string `json:"visibility"`
	// CommitMarker and CommitDirs: directories matching CommitDirs (a
	// path.Match pattern, default "*") are published as one commit when a
	// file named CommitMarker appears in them.
	CommitMarker string `json:"commit_marker,omitempty"`
	CommitDirs   string `json:"commit_dirs,omitempty"`
	KeepVersions uint32 `json:"keep_versions"`
	KeepSeconds  int64  `json:"keep_seconds"`
}

func shareFromPB(s *filesharepb.Share) Share {
	return Share{Name: s.Name, Visibility: s.Visibility, CommitMarker: s.CommitMarker, CommitDirs: s.CommitDirs,
		KeepVersions: s.KeepVersions, KeepSeconds: s.KeepSeconds}
}

func (s Share) pb() *filesharepb.Share {
	return &filesharepb.Share{Name: s.Name, Visibility: s.Visibility, CommitMarker: s.CommitMarker, CommitDirs: s.CommitDirs,
		KeepVersions: s.KeepVersions, KeepSeconds: s.KeepSeconds}
}

// InitOptions say how Init treats the share.
type InitOptions struct {
	// Create defines the share (with Share's fields) when it does not
	// exist; without it the share must exist.
	Create bool
	// Share is the definition Create uses; its Name is Config.Share.
	Share Share
	// Dial are the connection options (see Options.DialOptions).
	Dial Options
}

// checkNotNested refuses a folder that lies inside a synced folder or holds
// one (symbolic links are not followed): each of its files would belong to
// two shares, and a change synced into one would be published to the other.
func checkNotNested(folder string) error {
	abs, err := filepath.Abs(folder)
	if err != nil {
		return fmt.Errorf("client: folder %s: %w", folder, err)
	}
	synced := func(dir string) bool {
		_, err := os.Lstat(filepath.Join(dir, safepath.StateDir, configFile))
		return err == nil
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if synced(dir) {
			return fmt.Errorf("client: folder %s is inside the synced folder %s: a file is synced in one share only; "+
				"init a folder outside it, or sync a subfolder of that share instead: %w", folder, dir, ErrNested)
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	var inner string
	_ = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // unreadable parts are the sync's to report
		}
		if p != abs && synced(p) {
			inner = p
			return filepath.SkipAll
		}
		if d.Name() == safepath.StateDir {
			return filepath.SkipDir
		}
		return nil
	})
	if inner != "" {
		return fmt.Errorf("client: folder %s holds the synced folder %s: a file is synced in one share only; "+
			"move it out first: %w", folder, inner, ErrNested)
	}
	return nil
}

// Init makes folder a synced folder: it checks that the share exists at
// the first reachable site (or creates it), probes whether the folder's
// filesystem folds case and writes the config. The folder must exist and
// not be initialized yet. It returns the share's definition.
func Init(ctx context.Context, folder string, cfg Config, o InitOptions) (Share, error) {
	if err := cfg.Validate(); err != nil {
		return Share{}, err
	}
	fi, err := os.Stat(folder)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Share{}, fmt.Errorf("client: folder %s does not exist: %w", folder, ErrNoFolder)
		}
		return Share{}, fmt.Errorf("client: folder %s: %w", folder, err)
	}
	if !fi.IsDir() {
		return Share{}, fmt.Errorf("client: folder %s is not a directory: %w", folder, ErrNoFolder)
	}
	root, err := os.OpenRoot(folder)
	if err != nil {
		return Share{}, fmt.Errorf("client: folder %s: %w", folder, err)
	}
	defer root.Close()
	if _, err := root.Stat(path.Join(safepath.StateDir, configFile)); err == nil {
		return Share{}, fmt.Errorf("client: folder %s is initialized already (%s): %w", folder,
			path.Join(folder, safepath.StateDir, configFile), ErrInitialized)
	}
	if err := checkNotNested(folder); err != nil {
		return Share{}, err
	}
	r, err := dialRemote(cfg.Sites, cfg.Share, o.Dial.DialOptions)
	if err != nil {
		return Share{}, err
	}
	defer r.close()
	var sh *filesharepb.Share
	if o.Create {
		def := o.Share
		def.Name = cfg.Share
		err = r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
			sh, err = api.CreateShare(ctx, &filesharepb.CreateShareRequest{Share: def.pb()})
			return err
		})
	} else {
		sh, err = r.getShare(ctx)
	}
	if err != nil {
		return Share{}, r.explain("share "+cfg.Share, err)
	}
	for _, d := range []string{safepath.StateDir, path.Join(safepath.StateDir, tmpDir)} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return Share{}, fmt.Errorf("client: %w", err)
		}
	}
	ci, err := probeCaseInsensitive(root)
	if err != nil {
		return Share{}, err
	}
	cfg.CaseInsensitive = ci
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return Share{}, err
	}
	if err := writeAtomic(root, path.Join(safepath.StateDir, configFile), append(b, '\n')); err != nil {
		return Share{}, err
	}
	return shareFromPB(sh), nil
}

// probeCaseInsensitive creates a probe file and looks for it under
// another case.
func probeCaseInsensitive(root *os.Root) (bool, error) {
	name := path.Join(safepath.StateDir, tmpDir, "case-Probe")
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return false, fmt.Errorf("client: case probe: %w", err)
	}
	_ = f.Close()
	defer root.Remove(name)
	_, err = root.Lstat(path.Join(safepath.StateDir, tmpDir, "CASE-pROBE"))
	return err == nil, nil
}

// readConfig reads a folder's config.
func readConfig(root *os.Root, folder string) (Config, error) {
	b, err := root.ReadFile(path.Join(safepath.StateDir, configFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("client: folder %s is not initialized (no %s; run stabsync init): %w",
			folder, path.Join(safepath.StateDir, configFile), ErrNotInitialized)
	}
	if err != nil {
		return Config{}, fmt.Errorf("client: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, fmt.Errorf("client: %s: %w", path.Join(folder, safepath.StateDir, configFile), err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path.Join(folder, safepath.StateDir, configFile))
	}
	return cfg, nil
}

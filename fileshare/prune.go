package fileshare

import (
	"cmp"
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/kv"
)

// DefaultPruneInterval is how often a site applies the shares' history
// retention to the versions it recorded.
const DefaultPruneInterval = time.Minute

// pruneLoop applies history retention every PruneInterval.
func (s *Service) pruneLoop() {
	t := time.NewTicker(s.cfg.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		shares, err := s.Shares(s.ctx)
		if err != nil {
			continue
		}
		for _, sh := range shares {
			if n, err := s.Prune(s.ctx, sh.Name); err != nil {
				s.log.Warn("history retention", "share", sh.Name, "error", err)
			} else if n > 0 {
				s.log.Info("history retention pruned versions", "share", sh.Name, "versions", n)
			}
		}
	}
}

// Prune applies a share's history retention to the versions this site
// recorded (each site prunes its own, so that one writer decides): a
// version superseded by a stable version of its path is pruned when more
// than keep_versions newer versions of the path exist, or when it is older
// than keep_seconds. Pruning rewrites the record without its chunk list
// (Pruned), so that descendants keep their ancestry; versions still shown
// (heads, conflict copies kept by a descendant) are never pruned. It
// returns how many versions it pruned.
func (s *Service) Prune(ctx context.Context, share string) (int, error) {
	sh, err := s.Share(ctx, share)
	if err != nil {
		return 0, err
	}
	vs, err := s.List(ctx, share, "")
	if err != nil {
		return 0, err
	}
	horizon := s.cfg.Now().Add(-time.Duration(sh.KeepSeconds) * time.Second).UnixNano()
	var ops []kv.Op
	for _, v := range prunable(vs, int(sh.KeepVersions), horizon, s.node.Site()) {
		stub := proto.CloneOf(v)
		stub.Chunks, stub.Pruned, stub.Stable, stub.PersistedAt = nil, true, false, nil
		b, err := manifest.Encode(stub)
		if err != nil {
			return 0, err
		}
		ops = append(ops, kv.Op{Key: versionKey(share, v.Path, v.Id), Value: b})
	}
	if len(ops) == 0 {
		return 0, nil
	}
	res, err := s.kv.WriteBatch(ctx, ops, kv.WriteOptions{Wait: "none"})
	s.wrote(share, ops, res)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if r.Err == nil {
			n++
		}
	}
	s.metrics.pruned.WithLabelValues(shareLabel(share)).Add(float64(n))
	return n, nil
}

// prunable picks, of the versions recorded by site, those retention drops:
// superseded by a stable version of the same path (an ancestor of it), not
// kept as a conflict copy, and beyond keep newer versions of the path or
// older than horizon (unix nanoseconds).
func prunable(vs []*filesharepb.Version, keep int, horizon int64, site string) []*filesharepb.Version {
	byID := map[string]*filesharepb.Version{}
	byPath := map[string][]*filesharepb.Version{}
	kept := map[string]bool{}
	for _, v := range vs {
		byID[v.Id] = v
		byPath[v.Path] = append(byPath[v.Path], v)
		for _, k := range v.Kept {
			kept[k] = true
		}
	}
	// superseded: ancestors, at the same path, of a stable version.
	superseded := map[string]bool{}
	var walk func(id, path string)
	walk = func(id, path string) {
		v := byID[id]
		if v == nil || v.Path != path || superseded[id] {
			return
		}
		superseded[id] = true
		for _, p := range v.Parents {
			walk(p, path)
		}
	}
	for _, v := range vs {
		if v.Stable {
			for _, p := range v.Parents {
				walk(p, v.Path)
			}
		}
	}
	var out []*filesharepb.Version
	for _, pvs := range byPath {
		slices.SortFunc(pvs, func(a, b *filesharepb.Version) int { // newest first
			if c := cmp.Compare(b.HlcWall, a.HlcWall); c != 0 {
				return c
			}
			return cmp.Compare(b.HlcLogical, a.HlcLogical)
		})
		for i, v := range pvs {
			old := i >= keep || v.HlcWall < horizon
			if old && superseded[v.Id] && !kept[v.Id] && !v.Pruned && v.Origin == site && v.Commit == "" {
				out = append(out, v)
			}
		}
	}
	return out
}

package fileshare

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv"
)

// KV key prefixes.
const (
	sharesPrefix   = "/fs/shares/"
	versionsPrefix = "/fs/v/"
)

var shareName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkShareName(name string) error {
	if !shareName.MatchString(name) {
		return fmt.Errorf("%w: name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadShare, name)
	}
	return nil
}

// normalize checks a share definition and fills its defaults.
func (s *Service) normalize(ctx context.Context, sh *filesharepb.Share) error {
	if err := checkShareName(sh.Name); err != nil {
		return err
	}
	if sh.Visibility == "" {
		sh.Visibility = DefaultVisibility
	}
	if _, err := s.node.Predicate(ctx, sh.Visibility); err != nil {
		return fmt.Errorf("%w %q: visibility: %w", ErrBadShare, sh.Name, err)
	}
	if sh.CommitMarker != "" {
		if strings.Contains(sh.CommitMarker, "/") || sh.CommitMarker == "." || sh.CommitMarker == ".." {
			return fmt.Errorf("%w %q: commit marker %q: want a file name, without '/'", ErrBadShare, sh.Name, sh.CommitMarker)
		}
		if sh.CommitDirs == "" {
			sh.CommitDirs = "*"
		}
		if _, err := path.Match(sh.CommitDirs, ""); err != nil {
			return fmt.Errorf("%w %q: commit dirs %q: %w", ErrBadShare, sh.Name, sh.CommitDirs, err)
		}
	} else if sh.CommitDirs != "" {
		return fmt.Errorf("%w %q: commit dirs %q set without a commit marker", ErrBadShare, sh.Name, sh.CommitDirs)
	}
	if sh.KeepVersions == 0 {
		sh.KeepVersions = DefaultKeepVersions
	}
	if sh.KeepSeconds == 0 {
		sh.KeepSeconds = int64(DefaultKeepAge.Seconds())
	}
	if sh.KeepSeconds < 0 {
		return fmt.Errorf("%w %q: keep seconds %d is negative", ErrBadShare, sh.Name, sh.KeepSeconds)
	}
	return nil
}

// CreateShare defines a share at every site, waiting for DefinitionWait.
// The same definition again returns the existing one.
func (s *Service) CreateShare(ctx context.Context, sh *filesharepb.Share) (*filesharepb.Share, error) {
	sh = proto.CloneOf(sh)
	if err := s.normalize(ctx, sh); err != nil {
		return nil, err
	}
	if old, err := s.Share(ctx, sh.Name); err == nil {
		if proto.Equal(old, sh) {
			return old, nil
		}
		return nil, fmt.Errorf("%w: %q is %v", ErrShareExists, sh.Name, old)
	}
	b, err := proto.Marshal(sh)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Put(ctx, sharesPrefix+sh.Name, b, kv.WriteOptions{Wait: s.cfg.DefinitionWait}); err != nil {
		return nil, fmt.Errorf("fileshare: create share %q: %w", sh.Name, err)
	}
	return sh, nil
}

// Share returns a share's definition as this site knows it.
func (s *Service) Share(ctx context.Context, name string) (*filesharepb.Share, error) {
	if err := checkShareName(name); err != nil {
		return nil, err
	}
	r, err := s.kv.Get(ctx, sharesPrefix+name, kv.ReadOptions{})
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("fileshare: share %q: %w", name, err)
	}
	if err != nil || !r.Found {
		return nil, fmt.Errorf("%w %q", ErrUnknownShare, name)
	}
	sh := &filesharepb.Share{}
	if err := proto.Unmarshal(r.Value, sh); err != nil {
		return nil, fmt.Errorf("fileshare: share %q: corrupt definition: %w", name, err)
	}
	return sh, nil
}

// Shares lists the shares this site knows.
func (s *Service) Shares(ctx context.Context) ([]*filesharepb.Share, error) {
	vs, err := s.kv.Scan(ctx, sharesPrefix, 0, kv.ReadOptions{})
	if err != nil {
		return nil, err
	}
	var out []*filesharepb.Share
	for _, v := range vs {
		sh := &filesharepb.Share{}
		if err := proto.Unmarshal(v.Value, sh); err != nil {
			s.log.Warn("skipping a corrupt share definition", "key", v.Key, "error", err)
			continue
		}
		out = append(out, sh)
	}
	return out, nil
}

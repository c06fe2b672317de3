package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/fileshare/client"
)

func newInitCmd(g *globals) *cobra.Command {
	var (
		cfg          client.Config
		create       bool
		share        client.Share
		settle       time.Duration
		keepVersions uint
		keepAge      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "init FOLDER --share NAME --site HOST:PORT",
		Short: "Make a folder a synced folder of a share",
		Long: `init makes FOLDER (which must exist) a synced folder of share NAME at the site
HOST:PORT, and writes FOLDER/.stabsync/config.json. The share must exist, unless
--create defines it (then --visibility, --marker and --commit-dirs say how).
--site may be given several times: the nearest first, the others used when it is lost.`,
		Example: `  stabsync init ./ckpt --share ckpt --site 10.0.1.5:7003
  stabsync init ./ckpt --share ckpt --site 10.0.1.5:7003 --create --visibility 'majority' \
      --marker .metadata --commit-dirs 'step-*' --keep-versions 3 --keep-age 168h`,
		Args: exactArgs("FOLDER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			if cfg.Share == "" {
				return usageError{fmt.Errorf("init: --share NAME is required")}
			}
			if len(cfg.Sites) == 0 {
				return usageError{fmt.Errorf("init: --site HOST:PORT is required")}
			}
			if !create && (share.Visibility != "" || share.CommitMarker != "" || share.CommitDirs != "" || keepVersions != 0 || keepAge != 0) {
				return usageError{fmt.Errorf("init: --visibility, --marker, --commit-dirs, --keep-versions and --keep-age define a share: they need --create")}
			}
			if keepAge < 0 {
				return usageError{fmt.Errorf("init: --keep-age %v: must not be negative", keepAge)}
			}
			share.KeepVersions, share.KeepSeconds = uint32(keepVersions), int64(keepAge.Seconds())
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			cfg.SettleTime = client.Duration(settle)
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			sh, err := client.Init(ctx, args[0], cfg, client.InitOptions{Create: create, Share: share})
			if err != nil {
				if !create && errors.Is(err, client.ErrUnknownShare) {
					return fmt.Errorf("%w\n(create it with --create, or check --share)", err)
				}
				return err
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"folder": args[0], "share": sh, "sites": cfg.Sites})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s syncs share %s (visibility %s", args[0], sh.Name, sh.Visibility)
			if sh.CommitMarker != "" {
				fmt.Fprintf(cmd.OutOrStdout(), ", commit marker %s in %s", sh.CommitMarker, sh.CommitDirs)
			}
			fmt.Fprintf(cmd.OutOrStdout(), ") at %s; start it with: stabsync run %s\n", strings.Join(cfg.Sites, ", "), args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.Share, "share", "", "share name (required)")
	cmd.Flags().StringSliceVar(&cfg.Sites, "site", nil, "client address of a site, host:port (required; repeat for fallbacks)")
	cmd.Flags().BoolVar(&create, "create", false, "create the share if it does not exist")
	cmd.Flags().StringVar(&share.Visibility, "visibility", "", "with --create: the predicate under which versions become visible elsewhere (default majority)")
	cmd.Flags().StringVar(&share.CommitMarker, "marker", "", "with --create: publish a directory as one commit when this file appears in it (e.g. .metadata)")
	cmd.Flags().StringVar(&share.CommitDirs, "commit-dirs", "", "with --create: path.Match pattern of the directories committed by marker (default *)")
	cmd.Flags().UintVar(&keepVersions, "keep-versions", 0, "with --create: older versions kept per path beyond the current one (default 10)")
	cmd.Flags().DurationVar(&keepAge, "keep-age", 0, "with --create: how long older versions are kept (default 720h, 30 days)")
	cmd.Flags().DurationVar(&settle, "settle", 0, "how long a file must stay unchanged before it is published (default 2s)")
	return cmd
}

func newRunCmd(g *globals) *cobra.Command {
	var (
		allowMassDelete bool
		verbose         bool
	)
	cmd := &cobra.Command{
		Use:   "run [FOLDER]",
		Short: "Sync the folder both ways until interrupted",
		Long: `run syncs FOLDER (default .) with its share until interrupted (SIGINT, SIGTERM): the
file being written then is finished or abandoned, never left half-way in place. When
more than half of the folder's files disappear at once, or the folder itself, run
stops syncing and says so (stabsync status shows it too); after checking, run again
with --allow-mass-delete to propagate those deletes once.`,
		Example: `  stabsync run ./ckpt
  stabsync run ./ckpt --allow-mass-delete`,
		Args: folderArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			level := hclog.Info
			if verbose {
				level = hclog.Debug
			}
			log := hclog.New(&hclog.LoggerOptions{Name: "stabsync", Output: cmd.ErrOrStderr(), Level: level})
			s, err := client.Open(folderOf(args), client.Options{Logger: log, Progress: newProgress(cmd.ErrOrStderr()),
				AllowMassDelete: allowMassDelete})
			if err != nil {
				return err
			}
			defer s.Close()
			log.Info("syncing", "folder", s.Folder(), "share", s.Config().Share, "sites", strings.Join(s.Config().Sites, ","))
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&allowMassDelete, "allow-mass-delete", false, "propagate a mass delete once")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logs")
	return cmd
}

func open(g *globals, folder string) (*client.Syncer, context.Context, context.CancelFunc, error) {
	s, err := client.Open(folder, client.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	return s, ctx, cancel, nil
}

func newWaitCmd(g *globals) *cobra.Command {
	var within time.Duration
	cmd := &cobra.Command{
		Use:   "wait [FOLDER] [--within D]",
		Short: "Wait until the folder and its share agree: every file synced",
		Long: `wait returns once every file of FOLDER (default .) and of its share is synced
(stable where the share's visibility predicate says, and the same here), exit 0, or after
--within, exit 1 naming what is not synced yet. A mass-delete stop or an error of the
running stabsync ends the wait at once, exit 1. It reads what stabsync run does; it syncs
nothing itself.`,
		Example: `  stabsync run ./ckpt &
  cp -r /scratch/step-1200 ./ckpt/ && stabsync wait ./ckpt --within 10m`,
		Args: folderArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if within <= 0 {
				return usageError{fmt.Errorf("wait: --within %v: must be positive", within)}
			}
			s, err := client.Open(folderOf(args), client.Options{})
			if err != nil {
				return err
			}
			defer s.Close()
			deadline := time.Now().Add(within)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
				st, err := s.Status(ctx)
				cancel()
				in, behind := st.InSync()
				switch {
				case err == nil && in:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: in sync (%d files)\n", st.Folder, len(st.Files))
					return nil
				case err == nil && st.Stopped():
					return fmt.Errorf("wait: %s: %s", st.State, st.Error)
				case time.Now().After(deadline):
					if err != nil {
						return fmt.Errorf("wait: not in sync after %v: %w", within, err)
					}
					return fmt.Errorf("wait: not in sync after %v: %s", within, describeBehind(behind, st.Running))
				}
				time.Sleep(250 * time.Millisecond) // polling the status, not synchronising a test
			}
		},
	}
	cmd.Flags().DurationVar(&within, "within", 5*time.Minute, "give up after this long")
	return cmd
}

// describeBehind names up to five files that are not synced, and their
// states.
func describeBehind(fs []client.FileStatus, running bool) string {
	var parts []string
	for i, f := range fs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(fs)-5))
			break
		}
		parts = append(parts, f.Path+" "+f.State)
	}
	s := strings.Join(parts, ", ")
	if !running {
		s += " (stabsync run is not running for this folder: start it)"
	}
	return s
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status [FOLDER]",
		Short: "Show each file's state: synced, local, uploading, pending, downloading",
		Long: `status lists every file of FOLDER (default .) and of its share with its state:
  synced       the file is the share's version (stable: where it is persisted)
  local        changed here, not published yet
  uploading    being published (with progress)
  pending      published from here, not stable yet
  remote       a version to fetch; downloading: being fetched (with progress)
  waiting      a version elsewhere that is not stable yet
  refused      a path of the share this folder does not materialize
It also says whether stabsync run is running, and a mass-delete stop.`,
		Example: `  stabsync status ./ckpt
  stabsync status ./ckpt -o json | jq '.files[] | select(.state != "synced")'`,
		Args: folderArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			s, ctx, cancel, err := open(g, folderOf(args))
			if err != nil {
				return err
			}
			defer cancel()
			defer s.Close()
			st, err := s.Status(ctx)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			w := cmd.OutOrStdout()
			run := "not running"
			if st.Running {
				run = "running"
			}
			fmt.Fprintf(w, "folder %s, share %s at %s: %s (%s)\n", st.Folder, st.Share, st.Site, st.State, run)
			if st.Error != "" {
				fmt.Fprintf(w, "!! %s\n", st.Error)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PATH\tSTATE\tSIZE\tVERSION\tWHERE")
			for _, f := range st.Files {
				where := ""
				switch {
				case f.Transfer != nil:
					where = fmt.Sprintf("%s of %s", bytesStr(f.Transfer.Done), bytesStr(f.Transfer.Bytes))
				case f.Reason != "":
					where = f.Reason
				case len(f.PersistedAt) > 0:
					where = "persisted at " + strings.Join(f.PersistedAt, ",")
					if f.Stable {
						where = "stable, " + where
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Path, f.State, bytesStr(f.Size), f.Version, where)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(st.Conflicts) > 0 {
				fmt.Fprintf(w, "%d conflict(s): see stabsync conflicts\n", len(st.Conflicts))
			}
			return nil
		},
	}
}

func bytesStr(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func newVersionsCmd(g *globals) *cobra.Command {
	var folder string
	cmd := &cobra.Command{
		Use:   "versions PATH",
		Short: "Show the history of a path of the share",
		Long: `versions lists every version of PATH (slash-separated, relative to the folder) the
site knows, oldest first: id, time (HLC), size, origin site, whether it is stable and
whether it is the current one.`,
		Example: `  stabsync versions notes/todo.txt -C ./docs
  stabsync versions step-10/shard-0 -C ./ckpt -o json`,
		Args: exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			s, ctx, cancel, err := open(g, folder)
			if err != nil {
				return err
			}
			defer cancel()
			defer s.Close()
			vs, err := s.Versions(ctx, args[0])
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), vs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tSIZE\tORIGIN\tSTABLE\tCURRENT")
			for _, v := range vs {
				size := bytesStr(v.Size)
				if v.Deleted {
					size = "deleted"
				}
				if v.Pruned {
					size += " (pruned)"
				}
				cur := ""
				if v.Current {
					cur = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", v.ID, v.Time.Format(time.RFC3339Nano), size, v.Origin, v.Stable, cur)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&folder, "folder", "C", ".", "the synced folder")
	return cmd
}

func newRestoreCmd(g *globals) *cobra.Command {
	var folder, version string
	var missing bool
	cmd := &cobra.Command{
		Use:   "restore PATH --version V | restore --missing",
		Short: "Make an old version of a path the current one, or fetch back files deleted here",
		Long: `restore records a new version of PATH with the content of version V (see stabsync
versions) on top of the current one: no data moves, the site holds the chunks. Every
running stabsync of the share then writes it like any other version.

restore --missing fetches back every synced file missing from the folder whose delete
was not published (after stabsync run stopped for a mass delete, the share still holds
them): it forgets those deletes, and the next stabsync run writes the files again from
the share. Stop stabsync run first.`,
		Example: `  stabsync versions notes/todo.txt -C ./docs
  stabsync restore notes/todo.txt --version 17979cfe362a000100000000-us-east-1 -C ./docs
  stabsync restore --missing -C ./docs && stabsync run ./docs`,
		Args: func(cmd *cobra.Command, args []string) error {
			if missing {
				return exactArgs()(cmd, args)
			}
			return exactArgs("PATH")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			if missing {
				if version != "" {
					return usageError{fmt.Errorf("restore: --missing takes no --version")}
				}
				return restoreMissing(cmd, g, folder)
			}
			if version == "" {
				return usageError{fmt.Errorf("restore: --version V is required (see stabsync versions %s)", args[0])}
			}
			s, ctx, cancel, err := open(g, folder)
			if err != nil {
				return err
			}
			defer cancel()
			defer s.Close()
			id, err := s.Restore(ctx, args[0], version)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"path": args[0], "restored": version, "version": id})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: version %s restored as %s\n", args[0], version, id)
			return nil
		},
	}
	cmd.Flags().StringVarP(&folder, "folder", "C", ".", "the synced folder")
	cmd.Flags().StringVar(&version, "version", "", "the version to restore (required without --missing)")
	cmd.Flags().BoolVar(&missing, "missing", false, "fetch back every synced file missing from the folder whose delete was not published")
	return cmd
}

func restoreMissing(cmd *cobra.Command, g *globals, folder string) error {
	s, err := client.Open(folder, client.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	paths, err := s.RestoreMissing()
	if err != nil {
		return err
	}
	if g.output == "json" {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"fetch": append([]string{}, paths...)})
	}
	if len(paths) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no synced file is missing: nothing to fetch")
		return nil
	}
	for _, p := range paths {
		fmt.Fprintln(cmd.OutOrStdout(), p)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%d files: stabsync run %s fetches them from the share\n", len(paths), folder)
	return nil
}

func newConflictsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "conflicts [FOLDER]",
		Short: "List the share's conflicts and their copies",
		Long: `conflicts lists the paths where concurrent versions met: the winner stays at the
path, the loser is kept as a conflict copy (the same name at every machine). Kind is
edit (two edits) or delete (an edit against a delete: the edit is kept).`,
		Example: `  stabsync conflicts ./docs
  stabsync conflicts ./docs -o json`,
		Args: folderArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput("text", "json"); err != nil {
				return err
			}
			s, ctx, cancel, err := open(g, folderOf(args))
			if err != nil {
				return err
			}
			defer cancel()
			defer s.Close()
			cs, err := s.Conflicts(ctx)
			if err != nil {
				return err
			}
			if g.output == "json" {
				out := make([]conflictJSON, len(cs))
				for i, c := range cs {
					out[i] = conflictJSON{Path: c.Path, Copy: c.Copy, Winner: string(c.Winner), Loser: string(c.Loser), Kind: c.Kind}
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(cs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no conflicts")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PATH\tCOPY\tKIND\tWINNER\tLOSER")
			for _, c := range cs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Path, c.Copy, c.Kind, c.Winner, c.Loser)
			}
			return tw.Flush()
		},
	}
}

type conflictJSON struct {
	Path   string `json:"path"`
	Copy   string `json:"copy"`
	Kind   string `json:"kind"`
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
}

package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// newSiteCmd is `wanbed site stop|kill|start SITE`: one site of a running
// testbed goes down gracefully, dies at once (SIGKILL: what a crash of its
// process looks like), or comes back on its config and data. The new PID
// goes into the testbed's state, so that `down` stops it too.
func newSiteCmd(dir *string, needDir func() error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "site stop|kill|start SITE --dir DIR",
		Short: "Stop (SIGTERM), kill (SIGKILL) or start again one site of a running testbed",
		Long: `site stop SITE sends the site SIGTERM and waits until it has shut down (it finishes
what it serves and closes its store); site kill SITE sends SIGKILL, as a crash would, and
waits until the process is gone; site start SITE starts it again on its config and data
folder and waits until it answers /healthz. The other sites and the links are untouched.`,
		Example: `  wanbed site kill ap-northeast-1 --dir /tmp/bed
  wanbed site start ap-northeast-1 --dir /tmp/bed`,
	}
	action := func(use, done, short string, do func(dir string, st *state, s *siteState, out io.Writer) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " SITE",
			Short: short,
			RunE: func(c *cobra.Command, args []string) error {
				if len(args) != 1 {
					return fmt.Errorf("wanbed site %s takes one SITE, got %d arguments", use, len(args))
				}
				if err := needDir(); err != nil {
					return err
				}
				st, err := loadState(*dir)
				if err != nil {
					return err
				}
				var known []string
				for i := range st.Sites {
					if st.Sites[i].Site == args[0] {
						if err := do(*dir, st, &st.Sites[i], c.ErrOrStderr()); err != nil {
							return err
						}
						fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", args[0], done)
						return nil
					}
					known = append(known, st.Sites[i].Site)
				}
				return fmt.Errorf("no site %q in the testbed (its sites: %v)", args[0], known)
			},
		}
	}
	stop := action("stop", "stopped", "Stop one site with SIGTERM and wait until it is down", func(_ string, _ *state, s *siteState, out io.Writer) error {
		if !alive(s.PID) {
			return fmt.Errorf("site %s is not running (pid %d)", s.Site, s.PID)
		}
		stopPIDs([]int{s.PID}, out)
		return nil
	})
	kill := action("kill", "killed", "Kill one site with SIGKILL, as a crash would, and wait until it is gone", func(_ string, _ *state, s *siteState, _ io.Writer) error {
		if !alive(s.PID) {
			return fmt.Errorf("site %s is not running (pid %d)", s.Site, s.PID)
		}
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill site %s (pid %d): %w", s.Site, s.PID, err)
		}
		if !waitExit(s.PID, time.Now().Add(10*time.Second)) {
			return fmt.Errorf("site %s (pid %d) still runs 10 s after SIGKILL", s.Site, s.PID)
		}
		return nil
	})
	start := action("start", "started", "Start one stopped site again on its config and data", func(dir string, st *state, s *siteState, _ io.Writer) error {
		return restartSite(dir, st, s.Site)
	})
	cmd.AddCommand(stop, kill, start)
	return cmd
}

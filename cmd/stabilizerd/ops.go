package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
)

// newCheck is `stabilizerd check`: the config checks a site runs at start,
// without starting it.
func newCheck() *cobra.Command {
	var configs []string
	cmd := &cobra.Command{
		Use:   "check --config FILE [--config FILE...] [FILE...]",
		Short: "Check config files as a site does at start, without starting it",
		Long: `check loads every config file as stabilizerd --config would and prints
"FILE: ok", or every bad field with its value. It exits 1 if any file is bad.
It does not open the TLS files or the data folder: those belong to the
machine the site runs on.`,
		Example: `  stabilizerd check --config /etc/stabilizer/config/site.yaml
  stabilizerd check deploy/compose/*.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := append(configs, args...)
			if len(files) == 0 {
				return errors.New("check: --config FILE is required")
			}
			bad := 0
			for _, f := range files {
				cfg, err := siteconfig.Load(f)
				if err != nil {
					bad++
					for _, line := range strings.Split(err.Error(), "\n") {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", line)
					}
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (site %s of %d)\n", f, cfg.Site, len(cfg.Sites))
			}
			if bad > 0 {
				return fmt.Errorf("check: %d of %d config files are bad", bad, len(files))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a config file to check (repeat for several)")
	return cmd
}

// newHealth is `stabilizerd health`, a container healthcheck for images
// without a shell or curl: GET the URL, exit 0 on 200 OK.
func newHealth() *cobra.Command {
	var url string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health [--url URL]",
		Short: "Exit 0 if the site's /healthz answers 200 OK (a container healthcheck)",
		Long: `health fetches the site's /healthz and exits 0 if it answers 200 OK, 1
otherwise, printing why. It is the healthcheck of images with no shell or
curl (the distroless image; docker compose).`,
		Example: `  stabilizerd health --url http://127.0.0.1:8080/healthz`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
				return fmt.Errorf("health: --url %q: not an http:// or https:// URL", url)
			}
			if timeout <= 0 {
				return fmt.Errorf("health: --timeout %v: must be positive", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return fmt.Errorf("health: --url: %w", err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("health: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("health: %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
			}
			fmt.Fprint(cmd.OutOrStdout(), string(body))
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080/healthz", "the site's health URL (its listen.http address)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

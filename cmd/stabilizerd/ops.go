package main

import (
	"context"
	"encoding/json"
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
	var skipFiles bool
	var output string
	cmd := &cobra.Command{
		Use:   "check --config FILE [--config FILE...] [FILE...]",
		Short: "Check config files as a site does at start, without starting it",
		Long: `check loads every config file as stabilizerd --config does at start: every
field (addresses and their ports, durations, predicates, retention, TLS) and,
unless --skip-files, the TLS files themselves (they must exist and hold a key
pair and a CA certificate). It prints "FILE: ok" or every bad field with its
value, and exits 1 if any file is bad. It does not open the data folder or
the ports: a site creates the one and binds the others when it starts.

Use --skip-files to check a config meant for another machine (a Kubernetes
Secret mounts its TLS files there only).`,
		Example: `  stabilizerd check --config /etc/stabilizer/config/site.yaml
  stabilizerd check --skip-files deploy/k8s/overlays/*/site.yaml
  stabilizerd check -o json site.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("check: -o %q: want text or json", output)
			}
			files := append(configs, args...)
			if len(files) == 0 {
				return errors.New("check: --config FILE is required")
			}
			results := make([]checkResult, 0, len(files))
			bad := 0
			for _, f := range files {
				r := checkFile(f, skipFiles)
				if !r.OK {
					bad++
				}
				results = append(results, r)
				if output == "text" {
					r.print(cmd.OutOrStdout(), cmd.ErrOrStderr())
				}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			}
			if bad > 0 {
				return fmt.Errorf("check: %d of %d config files are bad", bad, len(files))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a config file to check (repeat for several)")
	cmd.Flags().BoolVar(&skipFiles, "skip-files", false, "do not open the TLS files (a config for another machine)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json (one object per file: file, ok, site, sites, errors)")
	return cmd
}

// checkResult is what check found in one config file.
type checkResult struct {
	File   string   `json:"file"`
	OK     bool     `json:"ok"`
	Site   string   `json:"site,omitempty"`
	Sites  int      `json:"sites,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

func checkFile(path string, skipFiles bool) checkResult {
	r := checkResult{File: path}
	cfg, err := siteconfig.Load(path)
	if err == nil && !skipFiles {
		if _, _, terr := cfg.LoadTLS(); terr != nil {
			err = fmt.Errorf("config %s: %w (--skip-files checks a config meant for another machine)", path, terr)
		}
	}
	if err != nil {
		r.Errors = strings.Split(err.Error(), "\n")
		return r
	}
	r.OK, r.Site, r.Sites = true, cfg.Site, len(cfg.Sites)
	return r
}

func (r checkResult) print(stdout, stderr io.Writer) {
	if r.OK {
		fmt.Fprintf(stdout, "%s: ok (site %s of %d)\n", r.File, r.Site, r.Sites)
		return
	}
	for _, line := range r.Errors {
		fmt.Fprintf(stderr, "%s\n", line)
	}
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

package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/web"
	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

func init() { register(newReportCmd) }

// EnvServeToken is pem serve --http's token when --token is not given (a
// flag is visible to every user of the machine in the process list).
const EnvServeToken = "PEM_SERVE_TOKEN"

// webFlags are pem serve's knowledge browser flags.
func webFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "http", Usage: "serve the knowledge browser and the HTTP API on `ADDR` (HOST:PORT; 127.0.0.1:8080)"},
		&cli.StringFlag{Name: "token", EnvVars: []string{EnvServeToken}, Usage: "require `TOKEN` on every request (Authorization: Bearer); needed for a non-loopback --http"},
		&cli.BoolFlag{Name: "write", Usage: "accept POST /api/traces and /api/feedback (saves and verdicts)"},
		reportsFlag(),
	}
}

func reportsFlag() cli.Flag {
	return &cli.StringFlag{Name: "reports", Value: "bench", Usage: "list the bench reports (report.html) found in `DIR` and its subdirectories"}
}

// maxHistory bounds the commits an entry's page lists.
const maxHistory = 50

// webServer is the knowledge browser over the tree in dir.
func webServer(c *cli.Context, eng *engine.Engine, dir string, write bool, token string) *web.Server {
	return web.New(eng, web.Options{
		History: func(ctx context.Context, domain, key string) ([]web.Commit, error) {
			return entryHistory(ctx, dir, domain, key)
		},
		Reports:  func(context.Context) ([]web.Report, error) { return benchReports(c.String("reports")) },
		Classify: httpError,
		Token:    token,
		Write:    write,
		Logger:   logger(c),
	})
}

// entryHistory is pem log DOMAIN/KEY as values.
func entryHistory(ctx context.Context, dir, domain, key string) ([]web.Commit, error) {
	paths, err := store.EntryPaths(domain + "/" + key)
	if err != nil {
		return nil, err
	}
	h, err := gitrepo.OpenHistory(dir)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	entries, state, err := entryLog(ctx, h, paths, maxHistory)
	if err != nil {
		return nil, err
	}
	out := make([]web.Commit, 0, len(entries))
	for _, e := range entries {
		cm := web.Commit{Hash: e.Hash, When: e.When, Subject: e.Subject}
		if state[e.Hash] {
			cm.Subject += " [state]" // on refs/pem/state, not the branch
		}
		for _, ch := range e.Changes {
			cm.Changes = append(cm.Changes, ch.Path+": "+logState(ctx, h, ch))
		}
		out = append(out, cm)
	}
	return out, nil
}

// maxReports bounds the bench reports listed, newest first.
const maxReports = 20

var unsafeName = engine.LazyRE(`[^A-Za-z0-9._-]+`)

// benchReports finds the report.html files in dir (pem bench --out) and in
// its subdirectories two levels down, newest first. A missing dir has none.
func benchReports(dir string) ([]web.Report, error) {
	if dir == "" {
		return nil, nil
	}
	var out []web.Report
	seen := map[string]int{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel != "." && strings.Count(rel, string(filepath.Separator)) >= 2 {
			return fs.SkipDir
		}
		if d.IsDir() || d.Name() != "report.html" || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		where := filepath.Dir(p)
		name := filepath.Base(filepath.Clean(dir))
		if r := filepath.Dir(rel); r != "." {
			name = r
		}
		name = strings.Trim(unsafeName.ReplaceAllString(filepath.ToSlash(name), "-"), "-.")
		if name == "" {
			name = "bench"
		}
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, seen[name])
		}
		out = append(out, web.Report{Name: name, Dir: where, Modified: info.ModTime(), Read: func() ([]byte, error) {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("reading the bench report %s: %w", p, err)
			}
			return b, nil
		}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking for bench reports in %s: %w", dir, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Modified.After(out[j].Modified) })
	if len(out) > maxReports {
		out = out[:maxReports]
	}
	return out, nil
}

func newReportCmd() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write the knowledge browser's pages as static files (for a CI artifact or a pull request)",
		Description: "--html DIR writes index.html (every domain and entry with its tier, status and confidence,\n" +
			"flagged entries first), entry/<domain>/<intent-key>.html for each entry and reports/<name>.html for\n" +
			"each bench report found under --reports: the pages pem serve --http serves, with relative links, inline\n" +
			"CSS and SVG and no script, so they open from disk. Nothing in the tree is written.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "html", Usage: "write the pages into `DIR` (created if need be)"},
			reportsFlag(),
		},
		Action: runReport,
	}
}

func runReport(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("report takes no arguments, got %q: give the directory as --html DIR", c.Args().First())
	}
	out := c.String("html")
	if out == "" {
		return usagef("report needs --html DIR: where to write the pages")
	}
	e, s, err := openEngine(c)
	if err != nil {
		return err
	}
	defer s.Close()
	n, err := webServer(c, e, s.Root(), false, "").Export(c.Context, out)
	if err != nil {
		return fmt.Errorf("report --html %s: %w", out, err)
	}
	fmt.Fprintf(c.App.Writer, "wrote %d %s to %s (open %s)\n", n, plural(n, "page", "pages"), out, filepath.Join(out, "index.html"))
	return nil
}

package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Export writes the knowledge browser's pages into dir as static files that
// open from disk (every link relative): index.html, entry/<domain>/<key>.html
// for every entry on the index, and reports/<name>.html for every bench
// report. The API is not exported. It returns how many files it wrote.
func (s *Server) Export(ctx context.Context, dir string) (int, error) {
	d, err := s.index(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	write := func(rel string, b []byte) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("writing the pages: %w", err)
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("writing the pages: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("writing the pages: %w", err)
		}
		n++
		return nil
	}
	b, err := render("index", d)
	if err != nil {
		return n, err
	}
	if err := write("index.html", b); err != nil {
		return n, err
	}
	for _, dr := range d.Domains {
		for _, r := range dr.Rows {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			b, err := s.entryPage(ctx, dr.Domain, r.V.IntentKey)
			if err != nil {
				return n, err
			}
			if err := write(r.Href, b); err != nil {
				return n, err
			}
		}
	}
	if s.o.Reports != nil {
		rs, err := s.o.Reports(ctx)
		if err != nil {
			return n, err
		}
		for _, r := range rs {
			if !reportName.MatchString(r.Name) {
				return n, fmt.Errorf("bench report name %q: use letters, digits, '.', '_' and '-'", r.Name)
			}
			b, err := r.Read()
			if err != nil {
				return n, err
			}
			if err := write("reports/"+r.Name+".html", b); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

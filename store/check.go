package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Check reads the whole tree, bypassing the caches, and returns one error per
// problem: a file that does not parse or disagrees with its place
// (engine.ErrCorrupt), a symlink or a name pem would not have written
// (engine.ErrUnsafePath or ErrCorrupt). Every error names the path. An empty
// result means the tree is sound. Hidden files (.gitkeep, temporary files)
// are ignored. It is what `pem check` prints.
func (s *Store) Check(ctx context.Context) []error {
	var errs []error
	report := func(err error) { errs = append(errs, err) }
	checkOne := func(rel, kind string, decode func([]byte) (any, error)) {
		data, _, err := s.readFile(rel, int64(MaxBytes(kind)))
		if err == nil {
			_, err = decode(data)
		}
		switch {
		case err == nil:
		case errors.Is(err, engine.ErrUnsafePath):
			report(err)
		default:
			report(corrupt(rel, err))
		}
	}
	checkOne(configFile, KindConfig, decodeConfig)

	// entries lists dir, reporting symlinks and names that fail valid.
	entries := func(dir string, wantDir bool, valid func(string) error) []string {
		if ctx.Err() != nil {
			return nil
		}
		ents, err := s.rawList(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			report(err)
			return nil
		}
		var out []string
		for _, e := range ents {
			rel := dir + "/" + e.name
			switch {
			case e.typ&fs.ModeSymlink != 0:
				report(unsafeSymlink(rel))
			case wantDir && !e.typ.IsDir(), !wantDir && !e.typ.IsRegular():
				report(fmt.Errorf("%s: %w: unexpected %s here: pem ignores it; move it out of the tree", rel, engine.ErrCorrupt, kindOfEntry(e.typ)))
			case valid(e.name) != nil:
				report(fmt.Errorf("%s: %w: unexpected name (%v): pem ignores it; rename or delete it", rel, engine.ErrCorrupt, valid(e.name)))
			default:
				out = append(out, e.name)
			}
		}
		return out
	}
	yamlName := func(valid func(string) error) func(string) error {
		return func(name string) error {
			base, ok := strings.CutSuffix(name, yamlExt)
			if !ok {
				return fmt.Errorf("not a %s file", yamlExt)
			}
			return valid(base)
		}
	}

	for _, d := range entries(tracesDir, true, checkDomain) {
		for _, day := range entries(tracesDir+"/"+d, true, checkDay) {
			dir := tracesDir + "/" + d + "/" + day
			for _, name := range entries(dir, false, yamlName(checkTraceID)) {
				ref := engine.TraceRef{Domain: d, Day: day, ID: strings.TrimSuffix(name, yamlExt)}
				checkOne(dir+"/"+name, KindTrace, traceDecoder(ref))
			}
		}
	}
	for _, d := range entries(verdictsDir, true, checkDomain) {
		for _, id := range entries(verdictsDir+"/"+d, true, checkTraceID) {
			dir := verdictsDir + "/" + d + "/" + id
			for _, name := range entries(dir, false, yamlName(checkKey)) {
				checkOne(dir+"/"+name, KindVerdict, verdictDecoder(d, id, strings.TrimSuffix(name, yamlExt)))
			}
		}
	}
	for _, top := range []string{experienceDir, factsDir} {
		valid := yamlName(checkKey)
		if top == factsDir {
			// A domain's site entry sits beside its facts (site.go).
			valid = func(name string) error {
				if name == siteFile {
					return nil
				}
				return yamlName(checkKey)(name)
			}
		}
		for _, d := range entries(top, true, checkDomain) {
			for _, name := range entries(top+"/"+d, false, valid) {
				key := strings.TrimSuffix(name, yamlExt)
				if top == factsDir && name == siteFile {
					checkOne(top+"/"+d+"/"+name, KindSite, siteDecoder(d))
				} else if top == factsDir {
					checkOne(top+"/"+d+"/"+name, KindFacts, factsDecoder(d, key))
				} else {
					checkOne(top+"/"+d+"/"+name, KindExperience, experienceDecoder(d, key))
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		report(fmt.Errorf("check stopped before the end: %w", err))
	}
	return errs
}

func kindOfEntry(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	return "file"
}

// rawList lists dir without the cache (hidden names skipped), refusing
// symlinks on the way.
func (s *Store) rawList(dir string) ([]dirent, error) {
	if err := s.noSymlinks(dir); err != nil {
		return nil, err
	}
	f, err := s.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []dirent
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			out = append(out, dirent{name: de.Name(), typ: de.Type()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

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

var _ engine.VerdictStore = (*Store)(nil)

// checkVerdict checks the names a verdict is stored under.
func checkVerdict(domain, trace, judge string) error {
	if err := checkDomain(domain); err != nil {
		return err
	}
	if err := checkTraceID(trace); err != nil {
		return err
	}
	return checkKey(judge)
}

// PutVerdict writes verdicts/<domain>/<trace>/<judge>.yaml once; like a
// trace it is immutable (engine.ErrExists when that judge judged the run).
func (s *Store) PutVerdict(ctx context.Context, v *engine.Verdict) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if v == nil {
		return "", errors.New("PutVerdict: nil verdict")
	}
	if err := checkVerdict(v.Domain, v.Trace, v.Judge); err != nil {
		return "", fmt.Errorf("saving verdict: %w", err)
	}
	if v.Format < 1 || v.Format > engine.Format || !v.Verdict.Valid() {
		return "", fmt.Errorf("saving verdict on %s: format %d, verdict %q: want format %d and right or wrong", v.Trace, v.Format, v.Verdict, engine.Format)
	}
	data, err := Marshal(v)
	if err != nil {
		return "", fmt.Errorf("saving verdict on %s: %w", v.Trace, err)
	}
	if len(data) > MaxVerdictBytes {
		return "", fmt.Errorf("%w: verdict on %s is %d bytes, over the cap of %d: shorten the note", engine.ErrTooLarge, v.Trace, len(data), MaxVerdictBytes)
	}
	rel := VerdictPath(v.Domain, v.Trace, v.Judge)
	err = s.createFile(rel, data)
	s.forgetDirs(rel)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s: %w: verdicts are immutable", rel, engine.ErrExists)
	}
	if err != nil {
		return "", fmt.Errorf("saving verdict %s: %w", rel, err)
	}
	return rel, nil
}

// Verdict reads one judge's verdict on a trace.
func (s *Store) Verdict(ctx context.Context, domain, trace, judge string) (*engine.Verdict, error) {
	if err := checkVerdict(domain, trace, judge); err != nil {
		return nil, err
	}
	rel := VerdictPath(domain, trace, judge)
	v, err := s.load(ctx, s.traces, rel, KindVerdict, true, verdictDecoder(domain, trace, judge))
	if err != nil {
		return nil, err
	}
	c := *v.(*engine.Verdict)
	return &c, nil
}

// Verdicts lists the verdicts of domain ("" for every domain), oldest first.
// Names that are not a valid domain, trace id or judge are skipped (Check
// reports bad files).
func (s *Store) Verdicts(ctx context.Context, domain string) ([]*engine.Verdict, error) {
	var domains []string
	if domain == "" {
		ds, err := s.subdirs(ctx, verdictsDir, checkDomain)
		if err != nil {
			return nil, err
		}
		domains = ds
	} else {
		if err := checkDomain(domain); err != nil {
			return nil, err
		}
		domains = []string{domain}
	}
	var out []*engine.Verdict
	for _, d := range domains {
		ids, err := s.subdirsIn(ctx, verdictsDir+"/"+d, checkTraceID, domain != "")
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			ents, err := s.listDirIn(ctx, verdictsDir+"/"+d+"/"+id, false)
			if err != nil {
				return nil, err
			}
			for _, e := range ents {
				judge, ok := strings.CutSuffix(e.name, yamlExt)
				if !ok || !e.typ.IsRegular() || checkKey(judge) != nil {
					continue
				}
				v, err := s.Verdict(ctx, d, id, judge)
				if err != nil {
					if errors.Is(err, engine.ErrCorrupt) || errors.Is(err, engine.ErrNotFound) {
						continue
					}
					return nil, err
				}
				out = append(out, v)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		if out[i].Trace != out[j].Trace {
			return out[i].Trace < out[j].Trace
		}
		return out[i].Judge < out[j].Judge
	})
	return out, nil
}

func verdictDecoder(domain, trace, judge string) func([]byte) (any, error) {
	return func(data []byte) (any, error) {
		v := new(engine.Verdict)
		if err := Unmarshal(data, v, KindVerdict); err != nil {
			return nil, err
		}
		if err := checkFormat(v.Format); err != nil {
			return nil, err
		}
		if v.Domain != domain || v.Trace != trace || v.Judge != judge {
			return nil, fmt.Errorf("%w: the file holds the verdict of %s on %s/%s, not the one its path names", engine.ErrCorrupt, v.Judge, v.Domain, v.Trace)
		}
		if !v.Verdict.Valid() {
			return nil, fmt.Errorf("%w: verdict %q is not right or wrong", engine.ErrCorrupt, v.Verdict)
		}
		return v, nil
	}
}

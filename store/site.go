package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/pemdev/pem/engine"
)

// The site entry of a domain (engine.Site) lives beside its facts, in
// facts/<domain>/_site.yaml: one per domain, written only by consolidation.
// Its name is not an intent key, so the facts listings (FactsKeys) never
// list it; Check validates it, PlaceOf places it (KindSite), the merge
// driver joins it (engine.MergeSite).

var _ engine.SiteStore = (*Store)(nil)

// Site reads facts/<domain>/_site.yaml.
func (s *Store) Site(ctx context.Context, domain string) (*engine.Site, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	v, err := s.load(ctx, s.records, SitePath(domain), KindSite, false, siteDecoder(domain))
	if err != nil {
		return nil, err
	}
	return v.(*engine.Site).Clone(), nil
}

// PutSite writes facts/<domain>/_site.yaml atomically in canonical form;
// identical content leaves the file as it was.
func (s *Store) PutSite(ctx context.Context, site *engine.Site) (string, error) {
	if site == nil {
		return "", errors.New("PutSite: nil site")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkDomain(site.Domain); err != nil {
		return "", fmt.Errorf("saving site: %w", err)
	}
	return s.writeRecord(SitePath(site.Domain), site.Format, KindSite, site)
}

// PutSites writes many site entries, each as PutSite would (canonical
// form, atomic, an unchanged file left alone, durable when it returns), as
// one batch the way PutRecords writes: fsynced temporary files, then every
// rename, each directory fsynced once — a consolidation updates hundreds of
// them a run, and one PutSite each cost a file fsync and a directory fsync.
// placed, if not nil, is called after each file is renamed into place. It
// returns the paths of all entries, written or unchanged.
func (s *Store) PutSites(ctx context.Context, sites []*engine.Site, placed func(rel string)) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	writes := make([]*fileWrite, len(sites))
	for i, site := range sites {
		if site == nil {
			return nil, errors.New("PutSites: nil site")
		}
		if err := checkDomain(site.Domain); err != nil {
			return nil, fmt.Errorf("saving site: %w", err)
		}
		rel := SitePath(site.Domain)
		data, err := recordBytes(rel, site.Format, KindSite, site)
		if err != nil {
			return nil, err
		}
		writes[i] = &fileWrite{rel: rel, data: data, max: int64(MaxBytes(KindSite))}
	}
	if err := s.writeGroups(ctx, [][]*fileWrite{writes}, s.onPlaced(placed)); err != nil {
		return nil, fmt.Errorf("saving site entries: %w", err)
	}
	return relsOf(writes), nil
}

func siteDecoder(domain string) func([]byte) (any, error) {
	return func(data []byte) (any, error) {
		site := new(engine.Site)
		if err := Unmarshal(data, site, KindSite); err != nil {
			return nil, err
		}
		if err := checkFormat(site.Format); err != nil {
			return nil, err
		}
		if site.Domain != domain {
			return nil, fmt.Errorf("%w: the file names the site %s, not the domain its path names", engine.ErrCorrupt, site.Domain)
		}
		return site, nil
	}
}

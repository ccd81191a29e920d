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

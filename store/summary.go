package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pemdev/pem/engine"
)

var _ engine.SummarizedExperience = (*Store)(nil)

// Summaries of experience files (engine.ExperienceSummary: what a related
// route needs, without the evidence) are kept in memory and, like the
// decoded cache (decoded.go), in .pem-cache:
//
//	.pem-cache/decoded/summary/experience/<domain>/<key>.yaml.json
//
// (JSON: a summary is small, and a gob decoder compiles its types anew for
// every file, which costs more than the summary saves) under the same rules: keyed by the YAML file's identity, used only when
// the file has that identity now and it is old enough to trust
// (racyWindow), written only by the query path, checked again for the
// entry it names, the policy it was computed under and its format. A new
// process's query below P2 reads up to four of them instead of decoding
// four entries' evidence.
const (
	summaryDir    = decodedDir + "/summary"
	summaryHeader = "pem summary 1 json\n"
)

// ExperienceSummary returns the summary of experience/<domain>/<key>.yaml
// under p (engine.Summarize), from memory or .pem-cache when the file is
// unchanged, else from the experience itself. The value is shared: the
// caller must not modify it. Errors are Experience's.
func (s *Store) ExperienceSummary(ctx context.Context, domain, key string, p engine.Policy) (*engine.ExperienceSummary, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	rel := ExperiencePath(domain, key)
	s.watched(rel, false) // before the file is confirmed or read (watch.go)
	start := s.now()
	fi, err := os.Lstat(s.abs(rel))
	var id fileID
	ok := err == nil && fi.Mode().IsRegular()
	if ok {
		id = idOf(fi)
		if v, hit := s.summaries.get(rel, id, start); hit {
			if sum := v.(*engine.ExperienceSummary); sum.Policy == p {
				return sum, nil
			}
		}
		if trusted(fi, start) {
			if sum := s.readSummary(rel, id, p); sum != nil {
				s.summaries.put(rel, id, sum, start)
				return sum, nil
			}
		}
	}
	x, err := s.experience(ctx, domain, key, true)
	if err != nil {
		return nil, err
	}
	sum := engine.Summarize(x, p)
	// Kept under the identity seen before the read: if the file changed
	// meanwhile, that identity never comes back, so nothing stale is served.
	if ok && trusted(fi, start) {
		s.summaries.put(rel, id, sum, start)
		s.writeSummary(rel, id, sum)
	}
	return sum, nil
}

func summaryPath(rel string) string { return summaryDir + "/" + rel + ".json" }

func summaryHead(id fileID) string {
	return summaryHeader + "types " + typePrint() + "\nfile " + fmt.Sprint(id) + "\n"
}

// readSummary returns the kept summary of rel (identity id) under p; nil
// when there is none, it is stale, of another policy or format, or names
// another entry.
func (s *Store) readSummary(rel string, id fileID, p engine.Policy) *engine.ExperienceSummary {
	if !id.unique() {
		return nil
	}
	data, _, err := s.readFile(summaryPath(rel), int64(MaxBytes(KindExperience)))
	if err != nil {
		return nil
	}
	body, ok := bytes.CutPrefix(data, []byte(summaryHead(id)))
	if !ok {
		return nil
	}
	sum := new(engine.ExperienceSummary)
	if err := json.Unmarshal(body, sum); err != nil {
		return nil
	}
	if sum.Format != engine.SummaryFormat || sum.Policy != p || rel != ExperiencePath(sum.Domain, sum.IntentKey) {
		return nil
	}
	return sum
}

func (s *Store) writeSummary(rel string, id fileID, sum *engine.ExperienceSummary) {
	if !id.unique() {
		return
	}
	body, err := json.Marshal(sum)
	if err != nil {
		return
	}
	s.writeCacheFile(summaryPath(rel), append([]byte(summaryHead(id)), body...))
}

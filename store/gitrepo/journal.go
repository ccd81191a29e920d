package gitrepo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// A commit series made with a journal survives a crash of the command that
// makes it: BeginSeries writes the commits about to be made into the git
// directory (never committed) before the command writes the files they
// commit; Series.Commit makes them and removes the journal; and the next
// command's RecoverSeries makes the commits a killed one journaled. Paths
// that hold no change by then (the files were never written, or were
// committed) make no commit, so recovering is always safe.

// ErrBadJournal is returned by RecoverSeries for a journal it cannot read
// (foreign, or of another format); it is set aside as <journal>.bad.
var ErrBadJournal = errors.New("unreadable commit journal")

const journalFormat = 1

type journalFile struct {
	Format  int             `json:"format"`
	Commits []CommitRequest `json:"commits"`
	State   *StateRequest   `json:"state,omitempty"` // made first (CommitState)
}

// JournalPath is the journal of the series called name:
// <git dir>/pem-<name>.journal.
func (R *Repo) JournalPath(name string) string { return R.StatePath("pem-" + name + ".journal") }

// Series is a journaled commit series (see BeginSeries).
type Series struct {
	r     *Repo
	path  string
	reqs  []CommitRequest
	state *StateRequest
	// State is what the state commit did, after Commit (nil without one).
	State *StateCommit
}

// BeginSeries journals the commits reqs under name, durably (the file and
// the git directory are fsynced), before the caller writes the files they
// commit. Each request's paths are sorted.
func (R *Repo) BeginSeries(name string, reqs []CommitRequest) (*Series, error) {
	return R.BeginStateSeries(name, nil, reqs)
}

// BeginStateSeries is BeginSeries with a state commit (CommitState, when
// state is not nil), made before the commits of reqs.
func (R *Repo) BeginStateSeries(name string, state *StateRequest, reqs []CommitRequest) (*Series, error) {
	for i := range reqs {
		sort.Strings(reqs[i].Paths)
	}
	if state != nil {
		sort.Strings(state.Paths)
	}
	data, err := json.Marshal(journalFile{Format: journalFormat, Commits: reqs, State: state})
	if err != nil {
		return nil, err
	}
	path := R.JournalPath(name)
	if err := writeDurable(path, data); err != nil {
		return nil, err
	}
	return &Series{r: R, path: path, reqs: reqs, state: state}, nil
}

// Commit makes the journaled commits (the state commit first, then
// CommitSeries) and removes the journal. On error the journal stays, for
// RecoverSeries.
func (s *Series) Commit(ctx context.Context, sig Signature) ([]string, error) {
	hashes, st, err := s.r.commitJournaled(ctx, s.state, s.reqs, sig)
	s.State = st
	if err != nil {
		return nil, err
	}
	return hashes, removeDurable(s.path)
}

// commitJournaled makes a journal's commits: the state's (which also moves
// what main tracks under the state's directories), then the series.
func (R *Repo) commitJournaled(ctx context.Context, state *StateRequest, reqs []CommitRequest, sig Signature) ([]string, *StateCommit, error) {
	var st *StateCommit
	if state != nil {
		var err error
		if st, err = R.CommitState(ctx, state, sig); err != nil {
			return nil, st, fmt.Errorf("committing the state (%s): %w", StateRef, err)
		}
	}
	hashes, err := R.CommitSeries(ctx, reqs, sig)
	return hashes, st, err
}

// RecoverSeries makes the commits of the series journaled under name that an
// interrupted command left, then removes the journal. It returns the hashes
// of CommitSeries (nil when there was no journal) and found, whether a
// journal was there. A journal it cannot read is set aside as <journal>.bad
// and ErrBadJournal returned.
func (R *Repo) RecoverSeries(ctx context.Context, name string, sig Signature) (hashes []string, found bool, err error) {
	hashes, _, found, err = R.RecoverStateSeries(ctx, name, sig)
	return hashes, found, err
}

// RecoverStateSeries is RecoverSeries, and also returns what the journal's
// state commit did (nil without one; its Hash is "" when the interrupted
// command had made it already).
func (R *Repo) RecoverStateSeries(ctx context.Context, name string, sig Signature) (hashes []string, state *StateCommit, found bool, err error) {
	path := R.JournalPath(name)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, true, fmt.Errorf("reading %s: %w", path, err)
	}
	var j journalFile
	if err := json.Unmarshal(data, &j); err != nil || j.Format != journalFormat {
		// A torn journal cannot happen (it is renamed into place); a foreign
		// one is set aside rather than trusted.
		_ = os.Rename(path, path+".bad")
		return nil, nil, true, fmt.Errorf("%w: %s set aside as %s.bad (format %d, error %v)", ErrBadJournal, path, path, j.Format, err)
	}
	hashes, state, err = R.commitJournaled(ctx, j.State, j.Commits, sig)
	if err != nil {
		return nil, state, true, fmt.Errorf("committing the series journaled in %s: %w", path, err)
	}
	return hashes, state, true, removeDurable(path)
}

// writeDurable writes data to path through path.tmp: the file is fsynced
// before the rename and the directory after it, so the journal is on disk
// before any file it covers is written.
func writeDurable(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// removeDurable removes path (gone already is fine) and fsyncs its directory.
func removeDurable(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

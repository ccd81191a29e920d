package gitrepo_test

import (
	"context"
	"errors"
	"github.com/pemdev/pem/store/storetest/gitcli"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// syncRemote makes a bare remote with one commit and a clone of it.
func syncRemote(t *testing.T) (bare, clone string) {
	root := t.TempDir()
	bare = filepath.Join(root, "shared.git")
	gitcli.Run(t, root, "init", "-q", "--bare", "-b", "main", bare)
	clone = filepath.Join(root, "a")
	gitcli.Run(t, root, "clone", "-q", bare, clone)
	gitlogWrite(t, clone, "pem.yaml", "format: 1\n")
	gitlogWrite(t, clone, ".gitignore", store.StateIgnore)
	gitlogCommit(t, clone, "init", 0)
	gitcli.Run(t, clone, "push", "-q", "origin", "main")
	return bare, clone
}

// syncHook installs a pre-receive hook in the bare repository bare.
func syncHook(t *testing.T, bare, script string) {
	name := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.WriteFile(name, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// anotherWriterWins is a pre-receive hook that moves the state ref before
// the push's ref update lands, as a concurrent agent would (an add-only
// commit of one trace on top of the state, or the first state): git
// receive-pack then refuses the update ("failed to update ref"). It runs
// outside the push's object quarantine, where git allows ref updates.
const anotherWriterWins = `unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
n=$(cat other.count 2>/dev/null || echo 0); n=$((n+1)); echo $n > other.count
old=$(git rev-parse -q --verify refs/pem/state)
export GIT_INDEX_FILE=$PWD/other.index
rm -f "$GIT_INDEX_FILE"
if [ -n "$old" ]; then git read-tree "$old"; fi
blob=$(echo "another writer's trace $n" | git hash-object -w --stdin)
git update-index --add --cacheinfo 100644,$blob,traces/z.example/2026-01-02/01JZ$(printf %022d $n).yaml
tree=$(git write-tree)
export GIT_AUTHOR_NAME=other GIT_AUTHOR_EMAIL=o@example.com GIT_COMMITTER_NAME=other GIT_COMMITTER_EMAIL=o@example.com
if [ -n "$old" ]; then new=$(echo "another writer" | git commit-tree -p "$old" "$tree"); else new=$(echo "another writer" | git commit-tree "$tree"); fi
git update-ref refs/pem/state "$new" $old
`

// A push that another writer wins every time: Sync replays and retries with
// the injected pauses, then returns ErrContended; the local commit stays and
// the next sync, once the other writer stopped, pushes it.
func TestSyncRetriesLostPushes(t *testing.T) {
	ctx := context.Background()
	bare, a := syncRemote(t)
	syncHook(t, bare, anotherWriterWins)
	var pauses []time.Duration
	opt := gitrepo.SyncOptions{TracesDir: store.TracesDir, TraceExt: store.TraceExt,
		Tries: 4, Backoff: 5 * time.Second, MaxBackoff: 12 * time.Second,
		Rand: func(n int64) int64 { return n - 1 }, // the longest pause allowed
		Sleep: func(_ context.Context, d time.Duration) error {
			pauses = append(pauses, d)
			return nil
		}}
	trace := gitlogTrace(t, a, "a.example", 1)
	res, err := syncDir(ctx, a, opt)
	if !errors.Is(err, gitrepo.ErrContended) {
		t.Fatalf("sync against a writer that always wins: %v, want ErrContended", err)
	}
	for _, s := range []string{"another writer kept winning", "4 times", "nothing is lost", "failed to update ref"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
	if res == nil || res.Retries != 3 || res.StatePushed {
		t.Fatalf("result: %+v", res)
	}
	// Three pauses: the caps double from the backoff (the tries are faster
	// than 5 s) and stop at the maximum.
	if want := []time.Duration{5 * time.Second, 10 * time.Second, 12 * time.Second}; len(pauses) != 3 || pauses[0] != want[0] || pauses[1] != want[1] || pauses[2] != want[2] {
		t.Errorf("pauses %v, want %v", pauses, want)
	}
	// Each try replayed the trace onto the other writer's newest state
	// commit; the trace is committed locally and not on the remote.
	state := gitrepo.StateRef.String()
	if got := gitcli.Run(t, a, "log", "--format=%s", "-2", state); !strings.HasPrefix(got, "pem: add 1 trace(s)\nanother writer") {
		t.Errorf("the local commit is not on top of the remote's state:\n%s", got)
	}
	if out := gitcli.Run(t, bare, "ls-tree", "-r", "--name-only", state); strings.Contains(out, trace) {
		t.Fatalf("the remote has the trace although every push lost:\n%s", out)
	}
	gitlogStatusClean(t, a)

	// The other writer stops: the next sync pushes the trace, the history is linear.
	if err := os.Remove(filepath.Join(bare, "hooks", "pre-receive")); err != nil {
		t.Fatal(err)
	}
	pauses = nil
	res, err = syncDir(ctx, a, opt)
	if err != nil || !res.StatePushed || res.Retries != 0 || len(pauses) != 0 {
		t.Fatalf("sync after the race: %+v, %v (pauses %v)", res, err, pauses)
	}
	out := gitcli.Run(t, bare, "ls-tree", "-r", "--name-only", state)
	if !strings.Contains(out, trace) || strings.Count(out, "z.example") != 4 {
		t.Fatalf("the remote lacks the trace or one of the other writer's four:\n%s", out)
	}
	if merges := gitcli.Run(t, bare, "rev-list", "--min-parents=2", "--count", state); merges != "0" {
		t.Errorf("%s merges on the remote", merges)
	}
	gitcli.Run(t, bare, "fsck", "--strict")
}

// A remote that refuses (here a hook that declines) is not a race: no retry,
// ErrRemoteRefused with the remote's reason.
func TestSyncRefusedIsNotRetried(t *testing.T) {
	ctx := context.Background()
	bare, a := syncRemote(t)
	syncHook(t, bare, "echo 'pushes to main need review' >&2\nexit 1\n")
	slept := 0
	opt := gitrepo.SyncOptions{TracesDir: store.TracesDir, TraceExt: store.TraceExt,
		Sleep: func(context.Context, time.Duration) error { slept++; return nil }}
	gitlogTrace(t, a, "a.example", 1)
	res, err := syncDir(ctx, a, opt)
	if !errors.Is(err, gitrepo.ErrRemoteRefused) || errors.Is(err, gitrepo.ErrContended) {
		t.Fatalf("sync to a remote whose hook declines: %v, want ErrRemoteRefused", err)
	}
	if !strings.Contains(err.Error(), "declined") || slept != 0 || res.Retries != 0 {
		t.Fatalf("refusal: %v, %d pauses, %+v", err, slept, res)
	}
	// No such remote: its own error, no retry.
	_, err = syncDir(ctx, a, gitrepo.SyncOptions{Remote: "nope", TracesDir: store.TracesDir, TraceExt: store.TraceExt})
	if !errors.Is(err, gitrepo.ErrNoRemote) || !strings.Contains(err.Error(), "git remote add nope") {
		t.Fatalf("unknown remote: %v", err)
	}
}

// A cancelled pause ends Sync with the context's error.
func TestSyncCancelledWhileWaiting(t *testing.T) {
	bare, a := syncRemote(t)
	syncHook(t, bare, anotherWriterWins)
	ctx, cancel := context.WithCancel(context.Background())
	opt := gitrepo.SyncOptions{TracesDir: store.TracesDir, TraceExt: store.TraceExt,
		Sleep: func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }}
	gitlogTrace(t, a, "a.example", 1)
	if _, err := syncDir(ctx, a, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("sync cancelled during a pause: %v", err)
	}
}

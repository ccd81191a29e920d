package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// How pem sync retries a push it lost to another writer. A lost push is
// harmless (the local commits stay, the remote is unchanged), so sync fetches,
// replays the add-only commits onto the new remote head and pushes again,
// after a pause drawn uniformly from [0, cap] ("full jitter": writers that
// collided spread out instead of colliding again in step). The cap starts at
// SyncBackoff, or at the lost try's duration when that is longer, and doubles
// up to SyncMaxBackoff: 50, 100, 200 … 6400 ms, then 8 s, for fast tries —
// at most about 69 s of waiting over 16 tries, half that on average, and
// only when other writers keep winning. (6 clones saving and syncing in a
// loop on a loaded 2-core machine needed up to 11 tries.)
const (
	SyncTries      = 16
	SyncBackoff    = 50 * time.Millisecond
	SyncMaxBackoff = 8 * time.Second
)

// ErrContended is returned by Sync when every try lost the push to another
// writer. Nothing is lost: the local commits stay on the branch (replayed
// onto the last remote head seen), and the next sync pushes them.
var ErrContended = errors.New("another writer kept winning the push")

// ErrRemoteRefused is returned by Sync when the remote refused the fetch or
// the push for a reason that is not a race — authentication, permissions, a
// hook that declined, a protected branch, an unpack failure on the remote's
// side. Retrying cannot help, so it is not retried.
var ErrRemoteRefused = errors.New("the remote refused")

// ErrNoRemote is returned by Sync when the repository has no remote of the
// name asked for.
var ErrNoRemote = errors.New("no remote")

// lostRaceReasons are the reasons git receive-pack (and hosting services)
// give for a ref update that lost to a concurrent one, as go-git reports them
// ("command error on refs/heads/main: failed to update ref") or as its own
// pre-push check phrases them. Lower case.
var lostRaceReasons = []string{
	"non-fast-forward",
	"fetch first",
	"failed to update ref",
	"failed to lock",
	"cannot lock ref",
	"unable to lock",
	"reference already exists",
	"stale info",
	"incorrect old value",
	"but expected", // "cannot lock ref 'refs/heads/main': is at X but expected Y"
	"ref changed",
}

// refusedReasons mark a push or fetch the remote refused on purpose.
var refusedReasons = []string{
	"hook declined",
	"denied",
	"permission",
	"protected branch",
	"not allowed",
	"unauthorized",
	"forbidden",
	"unpack error",
}

// lostRace reports whether err, from a push, means another writer updated
// the branch first: the push can be replayed and retried.
func lostRace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, git.ErrForceNeeded) || errors.Is(err, git.ErrNonFastForwardUpdate) {
		return true
	}
	if refused(err) {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, r := range lostRaceReasons {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}

// refused reports whether err, from a fetch or a push, is the remote's
// deliberate refusal (see ErrRemoteRefused). A ref update rejected for any
// reason other than a race ("command error on REF: REASON") is one too.
func refused(err error) bool {
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound) || errors.Is(err, transport.ErrInvalidAuthMethod) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, r := range refusedReasons {
		if strings.Contains(msg, r) {
			return true
		}
	}
	if strings.Contains(msg, "command error on ") {
		for _, r := range lostRaceReasons {
			if strings.Contains(msg, r) {
				return false
			}
		}
		return true
	}
	return false
}

// syncRetry is the retry policy of one Sync, with its impure parts injected.
type syncRetry struct {
	tries     int
	base, max time.Duration
	rand      func(n int64) int64 // uniform in [0, n)
	sleep     func(ctx context.Context, d time.Duration) error
}

func newSyncRetry(opt SyncOptions) syncRetry {
	r := syncRetry{tries: opt.Tries, base: opt.Backoff, max: opt.MaxBackoff, rand: opt.Rand, sleep: opt.Sleep}
	if r.tries <= 0 {
		r.tries = SyncTries
	}
	if r.base <= 0 {
		r.base = SyncBackoff
	}
	if r.max <= 0 {
		r.max = SyncMaxBackoff
	}
	if r.max < r.base {
		r.max = r.base
	}
	if r.rand == nil {
		r.rand = rand.Int64N
	}
	if r.sleep == nil {
		r.sleep = sleepContext
	}
	return r
}

// delay returns the pause before retry n (1 for the first retry), after a
// try that took took: uniform in [0, min(max, unit·2^(n-1))], where unit is
// base or, when longer, took. A push's duration is the window in which
// another writer's push makes it lose, so the pauses grow with it: on a slow
// remote or a loaded machine writers spread as far apart, counted in pushes,
// as on a fast one (with a fixed 50 ms unit, 6 writers whose pushes took a
// second each kept colliding until their tries ran out).
func (r syncRetry) delay(n int, took time.Duration) time.Duration {
	limit := max(r.base, took)
	for i := 1; i < n && limit < r.max; i++ {
		limit *= 2
	}
	limit = min(limit, r.max)
	return time.Duration(r.rand(int64(limit) + 1))
}

// The capture effect: a clone that syncs again right after its own push
// (an agent saving and syncing in a loop) starts its next push sooner than a
// writer pausing after a lost race can finish one, so it wins again and
// again while the others use up their tries — the writer that just won is
// the one that must defer (as Ethernet's fix for the same effect has it).
// So a sync that starts within yieldWindow units of this clone's last push
// pauses between one and three units first. A sync minutes after the last
// one never pauses.
const yieldWindow = 4

// lastPushFile, in the git directory, holds when this clone's last push
// ended and how long its try took, in Unix nanoseconds: "END TOOK\n".
const lastPushFile = "pem-sync-last-push"

// yield returns the pause before the first try, given when this clone's
// last push ended and how long its try took (zero when unknown).
func (r syncRetry) yield(now, lastEnd time.Time, lastTook time.Duration) time.Duration {
	if lastEnd.IsZero() {
		return 0
	}
	unit := max(r.base, lastTook)
	if age := now.Sub(lastEnd); age < 0 || age >= yieldWindow*unit {
		return 0
	}
	return unit + time.Duration(r.rand(int64(2*unit)+1))
}

func readLastPush(name string) (time.Time, time.Duration) {
	data, err := os.ReadFile(name)
	if err != nil {
		return time.Time{}, 0
	}
	var end, took int64
	if _, err := fmt.Sscanf(string(data), "%d %d", &end, &took); err != nil || end <= 0 || took < 0 {
		return time.Time{}, 0
	}
	return time.Unix(0, end), time.Duration(took)
}

// writeLastPush records a push; it is a hint, so a failure to write is ignored.
func writeLastPush(name string, end time.Time, took time.Duration) {
	_ = os.WriteFile(name, fmt.Appendf(nil, "%d %d\n", end.UnixNano(), int64(took)), 0o644)
}

// sleepContext waits d or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

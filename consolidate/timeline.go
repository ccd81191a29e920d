package consolidate

import (
	"log/slog"
	"time"
)

// timeline logs how long each phase of a run took (--verbose:
// msg=phase name=… took=… at=…), so the wall of a run can be read by phase
// (docs/performance.md, "Consolidation"). A nil logger logs nothing.
type timeline struct {
	log         *slog.Logger
	start, last time.Time
}

func newTimeline(log *slog.Logger) *timeline {
	now := time.Now()
	return &timeline{log: log, start: now, last: now}
}

// mark ends the phase name: its time since the previous mark, and the
// time since the run's start.
func (t *timeline) mark(name string) {
	if t == nil || t.log == nil {
		return
	}
	now := time.Now()
	t.log.Info("phase", "name", name, "took", now.Sub(t.last).Round(time.Microsecond), "at", now.Sub(t.start).Round(time.Microsecond))
	t.last = now
}

package agent

import "time"

// Timings splits a run's wall time by what it waited for (pem bench and
// pem demo print it by round; bench.Run.Phases has it per run). Duration covers Query
// through Finish; Deposit comes after it and is not part of it. Other is
// what none of the phases measured (recording, snapshots, scheduling).
type Timings struct {
	Query   time.Duration // the memory query and the Memory section
	Open    time.Duration // opening the run's tab (0 when the page is handed in)
	Checks  time.Duration // replay: selector existence/visibility and fingerprint checks
	Actions time.Duration // the actions themselves (navigate, click, type, read), load waits included
	Landing time.Duration // after an action: the HTTP status of the page it landed on
	Observe time.Duration // planning: observing the page for the planner
	Plan    time.Duration // planning: the planner's Next calls
	Answer  time.Duration // the answer checks and the success condition (replay and end of run)
	Finish  time.Duration // final title, screenshot, closing the tab
	Deposit time.Duration // saving the trace (after Duration)
}

// Other is the part of d no phase before the deposit measured.
func (t Timings) Other(d time.Duration) time.Duration {
	o := d - (t.Query + t.Open + t.Checks + t.Actions + t.Landing + t.Observe + t.Plan + t.Answer + t.Finish)
	if o < 0 {
		return 0
	}
	return o
}

// clock adds the time since t0 to *into and returns now.
func (r *run) clock(into *time.Duration, t0 time.Time) time.Time {
	now := r.now()
	*into += now.Sub(t0)
	return now
}

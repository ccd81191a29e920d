package agent_test

import (
	"os"
	"testing"
)

// TestCodeAndDatedVersionsAnswerNothing: on a documentation site of our
// own (agent/testdata/tally) two blocks match a task's words without
// answering it, the kinds that Debian's attrs docs had recorded as
// successes and replayed at P2: a code example that only uses
// tally.counter, for "which function returns the counters", and a
// version that dates a change ("as of version 3.2.0"), for "what is the
// current release"; and a decorator's definition read without its term
// (its one identifier another API's). None may be recorded as a success,
// cold or warm; the decorator, read with its term, is answered right.
func TestCodeAndDatedVersionsAnswerNothing(t *testing.T) {
	tasks := []siteTask{
		{ID: "counters", Site: "tally", Task: "Which function returns the counters of a Tally record?", Want: "tally.counters"},
		{ID: "release", Site: "tally", Task: "What is the current release of Tally?", Want: "4.0"},
		{ID: "decorator", Site: "tally", Task: "Which decorator turns a class into a Tally record?", Want: "tally.record"},
	}
	base := docServer(t, os.DirFS("testdata"), nil)
	sw := newSiteWorld(t)
	for _, session := range []string{"cold", "warm"} {
		sc, res := sw.round(t, session, base, tasks, session)
		if sc.wrongSuccess > 0 {
			for _, k := range tasks {
				t.Logf("%s: success %v, answer %q", k.ID, res[k.ID].Success, res[k.ID].Answer)
			}
			t.Errorf("%s: %d wrong answers recorded as success", session, sc.wrongSuccess)
		}
		if d := res["decorator"]; !d.Success || !rightAnswer(d.Answer, "tally.record") {
			t.Errorf("%s: the decorator's term and definition not read: success %v, answer %q", session, d.Success, d.Answer)
		}
		sw.consolidate(t)
	}
}

//go:build heldout

package agent_test

import (
	"os"
	"testing"
)

// TestHeldOut runs tasks on documentation sites the planner was not
// developed on (Debian's python-werkzeug-doc and python-requests-doc,
// served as installed): a check that explore is not tuned to the fixture.
// It reports its figures and fails only on a wrong answer recorded as
// success. It is built only with the heldout tag: make heldout (about a
// minute per site, which the suite's budget leaves to a separate target).
func TestHeldOut(t *testing.T) {
	for _, site := range []struct{ name, root, tasks string }{
		{"werkzeug", "/usr/share/doc/python-werkzeug-doc", "testdata/heldout-werkzeug.json"},
		{"requests", "/usr/share/doc/python-requests-doc", "testdata/heldout-requests.json"},
	} {
		t.Run(site.name, func(t *testing.T) {
			if _, err := os.Stat(site.root + "/html/index.html"); err != nil {
				t.Fatalf("%s is not installed: run 'apt-get install -y python-%s-doc' (make heldout does)", site.root, site.name)
			}
			tasks := loadSiteTasks(t, site.tasks)
			base := docServer(t, os.DirFS(site.root), nil)
			sw := newSiteWorld(t)
			cold, _ := sw.round(t, "held-out cold", base, tasks, "cold")
			sw.consolidate(t)
			warm, _ := sw.round(t, "held-out warm", base, tasks, "warm")
			for name, sc := range map[string]roundScore{"cold": cold, "warm": warm} {
				if sc.wrongSuccess > 0 {
					t.Errorf("held-out %s %s: %d wrong answers recorded as success", site.name, name, sc.wrongSuccess)
				}
			}
		})
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pemdev/pem/store/storetest/gitcli"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pemdev/pem/store/treegen"
)

// knowledgeOnlyRepo makes what a team adopting pem has: a repository that
// holds only a knowledge tree (at its root, KNOWLEDGE_DIR=".") and the
// workflows' scripts, copied from pem's repository. The tree holds the
// traces contributors merged for 30 × intents entries, not yet consolidated.
func knowledgeOnlyRepo(t *testing.T, intents, traces int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "knowledge")
	if err := treegen.Generate(context.Background(), dir, 30, intents, traces, 1); err != nil {
		t.Fatal(err)
	}
	for _, derived := range []string{"experience", "facts"} {
		des, err := os.ReadDir(filepath.Join(dir, derived))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if de.Name() != ".gitkeep" {
				if err := os.RemoveAll(filepath.Join(dir, derived, de.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	scripts, err := filepath.Glob(filepath.Join("..", "..", ".github", "scripts", "pem-*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no .github/scripts/pem-*.sh (%v)", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".github", "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".github", "scripts", filepath.Base(s)), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitcli.Run(t, dir, "init", "-q", "-b", "main")
	gitcli.Run(t, dir, "add", "-A")
	// The traces came through trace-only pull requests: tracked on main
	// until the consolidation moves them to refs/pem/state.
	gitcli.Run(t, dir, "add", "-f", "traces")
	gitcli.Run(t, dir, "commit", "-q", "-m", "knowledge")
	return dir
}

// runScript runs a workflow script the way a workflow step does: from the
// repository root, with the step's environment.
func runScript(t *testing.T, dir string, env []string, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(".github", "scripts", name)}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestWorkflowPRBody: the consolidation workflow's describe step on a
// knowledge-only repository whose first consolidation makes 300 entries: the
// diff is over GitHub's 65,536-character limit, the body is under it and
// ends with the note, and the full diff (the artifact) is complete.
func TestWorkflowPRBody(t *testing.T) {
	dir := knowledgeOnlyRepo(t, 10, 900)
	before := strings.TrimSpace(gitcli.Run(t, dir, "rev-parse", "HEAD"))
	if code, out, errs := runPem(t, "--knowledge", dir, "consolidate", "--now", "2025-06-02"); code != 0 {
		t.Fatalf("pem consolidate: %d\n%s%s", code, out, errs)
	}
	code, full, errs := runPem(t, "--knowledge", dir, "diff", before, "HEAD", "--format", "markdown")
	if code != 0 {
		t.Fatalf("pem diff: %d %s", code, errs)
	}
	// Main's diff: the facts the consolidation made (the experience is on
	// refs/pem/state); most of the 300 entries have facts after it.
	facts := 0
	for _, l := range strings.Split(gitcli.Run(t, dir, "ls-tree", "-r", "--name-only", "HEAD", "facts"), "\n") {
		if strings.HasSuffix(l, ".yaml") && !strings.HasSuffix(l, "/_site.yaml") {
			facts++
		}
	}
	if facts < 250 || !strings.Contains(full, fmt.Sprintf("%d entries changed", facts)) {
		t.Fatalf("the diff is not of the %d entries with facts:\n%.300s", facts, full)
	}
	if len(full) <= 65536 {
		t.Fatalf("the diff of 300 entries is %d bytes: too small to test the cut", len(full))
	}
	tmp := t.TempDir()
	fullFile, body := filepath.Join(tmp, "pem-diff.md"), filepath.Join(tmp, "body.md")
	if err := os.WriteFile(fullFile, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"GITHUB_SERVER_URL=https://github.com", "GITHUB_REPOSITORY=acme/knowledge", "GITHUB_RUN_ID=42", "MAX_BODY_BYTES="}
	if _, errs, err := runScript(t, dir, env, "pem-pr-body.sh", fullFile, body); err != nil {
		t.Fatalf("pem-pr-body.sh: %v\n%s", err, errs)
	}
	b, err := os.ReadFile(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= 65536 || len(b) < 50000 {
		t.Errorf("body is %d bytes, want under 65,536 and most of the room used", len(b))
	}
	text := string(b)
	cut := strings.Index(text, "\n---\n\n**The report is cut here**")
	if cut < 0 || !strings.Contains(text[cut:], "[this workflow run](https://github.com/acme/knowledge/actions/runs/42)") {
		t.Fatalf("body does not end with the note pointing at the run:\n%s", text[max(0, len(text)-600):])
	}
	if !strings.HasPrefix(full, text[:cut]) || !strings.HasSuffix(text[:cut], "\n") {
		t.Errorf("the body is not whole lines from the top of the diff")
	}
	if got, _ := os.ReadFile(fullFile); string(got) != full {
		t.Errorf("the full diff file changed: %d bytes, want %d", len(got), len(full))
	}

	// A small report is the body as it is.
	small := filepath.Join(tmp, "small.md")
	os.WriteFile(small, []byte("## one entry\n"), 0o644)
	if _, errs, err := runScript(t, dir, env, "pem-pr-body.sh", small, body); err != nil {
		t.Fatalf("pem-pr-body.sh: %v\n%s", err, errs)
	}
	if got, _ := os.ReadFile(body); string(got) != "## one entry\n" {
		t.Errorf("small body = %q", got)
	}
}

// TestWorkflowCheckMode: pem-check.yml's choice between `pem check --pr`
// and the consolidation's `pem check`. A fork's branch named
// pem/consolidate-x that rewrites experience/ gets the strict check, which
// then refuses it; the same change on a branch of the repository itself is a
// consolidation; a trace-only branch of the repository is a contribution.
func TestWorkflowCheckMode(t *testing.T) {
	origin := knowledgeOnlyRepo(t, 1, 60)
	root := filepath.Dir(origin)
	clone := func(name, branch string) string {
		d := filepath.Join(root, name)
		gitcli.Run(t, root, "clone", "-q", origin, d)
		gitcli.Run(t, d, "checkout", "-q", "-b", branch)
		return d
	}
	mode := func(d, headRepo string) string {
		t.Helper()
		env := []string{"BASE_REPO=acme/knowledge", "HEAD_REPO=" + headRepo, "KNOWLEDGE_DIR=."}
		out, errs, err := runScript(t, d, env, "pem-check-mode.sh", "main")
		if err != nil {
			t.Fatalf("pem-check-mode.sh: %v\n%s", err, errs)
		}
		return strings.TrimSpace(out)
	}

	// A fork, with the consolidation's branch name and a consolidation's change.
	fork := clone("fork", "pem/consolidate-x")
	if code, out, errs := runPem(t, "--knowledge", fork, "consolidate", "--now", "2025-06-02"); code != 0 {
		t.Fatalf("pem consolidate: %d\n%s%s", code, out, errs)
	}
	// The experience it wrote goes to refs/pem/state; the fork commits it
	// on the branch, as a hostile or old-style consolidation would.
	gitcli.Run(t, fork, "add", "-f", "experience")
	gitcli.Run(t, fork, "commit", "-q", "-m", "experience on the branch")
	if gitcli.Run(t, fork, "diff", "--name-only", "origin/main...HEAD", "--", "experience") == "" {
		t.Fatalf("the fork's branch changes no experience/ file: the test proves nothing\n%s", gitcli.Run(t, fork, "log", "--stat", "-3"))
	}
	if got := mode(fork, "mallory/knowledge"); got != "pr" {
		t.Fatalf("a fork's pem/consolidate-x branch gets %q, want the strict pr check", got)
	}
	if code, out, _ := runPem(t, "--knowledge", fork, "check", "--pr", "origin/main"); code == 0 || !strings.Contains(out, "experience/") {
		t.Errorf("pem check --pr on the fork's consolidation exits %d:\n%s\nwant the derived-file problem", code, out)
	}
	// A fork whose repository is gone (deleted after opening the pull request).
	if got := mode(fork, ""); got != "pr" {
		t.Errorf("a pull request from a deleted fork gets %q, want pr", got)
	}
	// The same change pushed to the repository itself: the consolidation.
	if got := mode(fork, "acme/knowledge"); got != "consolidation" {
		t.Errorf("a consolidation branch of the repository gets %q, want consolidation", got)
	}
	// The consolidation of a tree whose experience is on refs/pem/state
	// changes facts and site entries on the branch: a branch of the
	// repository that rewrites a site entry is a consolidation.
	site := clone("site", "pem/consolidate")
	if code, out, errs := runPem(t, "--knowledge", site, "consolidate", "--now", "2025-06-02"); code != 0 {
		t.Fatalf("pem consolidate: %d\n%s%s", code, out, errs)
	}
	gitcli.Run(t, site, "update-ref", "refs/remotes/origin/main", "HEAD") // merged and fetched
	siteFile := strings.Split(gitcli.Run(t, site, "ls-files", "facts/*/_site.yaml"), "\n")[0]
	if siteFile == "" {
		t.Fatal("the consolidation wrote no site entry: the test proves nothing")
	}
	os.WriteFile(filepath.Join(site, siteFile), append(must(os.ReadFile(filepath.Join(site, siteFile))), "# rewritten\n"...), 0o644)
	gitcli.Run(t, site, "commit", "-q", "-am", "a site entry")
	if got := mode(site, "acme/knowledge"); got != "consolidation" {
		t.Errorf("a branch of the repository that rewrites only a site entry gets %q, want consolidation", got)
	}
	if got := mode(site, "mallory/knowledge"); got != "pr" {
		t.Errorf("a fork that rewrites a site entry gets %q, want pr", got)
	}

	// A branch of the repository that only adds a trace: a contribution.
	contrib := clone("contrib", "pem/consolidate-y")
	trace := filepath.Join(contrib, "traces", "new.example", "2025-07-01", "01JZ0000000000000000000000.yaml")
	os.MkdirAll(filepath.Dir(trace), 0o755)
	os.WriteFile(trace, []byte("format: 1\n"), 0o644)
	gitcli.Run(t, contrib, "add", "-f", trace) // traces/ is ignored on main: a contributor adds with -f
	gitcli.Run(t, contrib, "commit", "-q", "-m", "a trace")
	if got := mode(contrib, "acme/knowledge"); got != "pr" {
		t.Errorf("a trace-only branch of the repository gets %q, want pr", got)
	}
}

// TestWorkflowsForKnowledgeOnlyRepos: the workflows meant to be copied run
// in a repository without pem's source: they install a pinned release
// (checksum-verifying script, cache), name only scripts that exist, declare
// their permissions, and never decide anything from a branch name.
func TestWorkflowsForKnowledgeOnlyRepos(t *testing.T) {
	dir := filepath.Join("..", "..", ".github")
	pinned := regexp.MustCompile(`(?m)^  PEM_VERSION: v[0-9]+\.[0-9]+\.[0-9]+\s*$`)
	script := regexp.MustCompile(`\.github/scripts/[a-z0-9-]+\.sh`)
	for _, name := range []string{"pem-consolidate.yml", "pem-check.yml", "pem-deep-learn.yml"} {
		b, err := os.ReadFile(filepath.Join(dir, "workflows", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, want := range []string{"pem-install.sh \"$PEM_VERSION\"", "uses: actions/cache@", "\npermissions:\n", "hashFiles('cmd/pem/main.go') == ''"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not contain %q", name, want)
			}
		}
		if !pinned.MatchString(text) {
			t.Errorf("%s does not pin PEM_VERSION to a release tag", name)
		}
		for _, bad := range []string{"head_ref", "@latest", "go install"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		for _, s := range script.FindAllString(text, -1) {
			if _, err := os.Stat(filepath.Join("..", "..", s)); err != nil {
				t.Errorf("%s runs %s: %v", name, s, err)
			}
		}
	}
}

// TestWorkflowConsolidateJobSharesTheState runs the consolidation job's pem
// and git commands (pem-consolidate.yml) against a file:// remote that an
// old-style tree is on (its traces merged through trace-only pull requests),
// with an agent that syncs traces during the job: a depth-1 checkout takes
// the state, consolidates, pushes the state with its lease over the agent's
// push, and leaves main to the pull request; once the pull request is
// merged, main holds no trace and the agent keeps every trace on disk.
func TestWorkflowConsolidateJobSharesTheState(t *testing.T) {
	origin := knowledgeOnlyRepo(t, 1, 60)
	root := filepath.Dir(origin)
	bare := filepath.Join(root, "remote.git")
	gitcli.Run(t, root, "clone", "-q", "--bare", origin, bare)
	url := "file://" + bare
	agent := filepath.Join(root, "agent")
	gitcli.Run(t, root, "clone", "-q", url, agent)
	save := func(i int) string {
		t.Helper()
		run := fmt.Sprintf(`{"task":"agent run %d","steps":[{"seq":1,"action":"navigate","url":"https://agent.example/"}]}`, i)
		code, out, errs := runPem(t, "--knowledge", agent, "experience", "save", "https://agent.example/", run, "--intent", "agent task")
		var res struct {
			TracePath string `json:"trace_path"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.TracePath == "" {
			t.Fatalf("save: %d %s %s", code, out, errs)
		}
		if code, out, errs := runPem(t, "--knowledge", agent, "sync"); code != 0 {
			t.Fatalf("agent sync: %d %s %s", code, out, errs)
		}
		return res.TracePath
	}
	diskTraces := func(dir string) []string {
		var out []string
		filepath.WalkDir(filepath.Join(dir, "traces"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		return out
	}
	save(1)
	state := "refs/pem/state"
	mainBefore := gitcli.Run(t, bare, "rev-parse", "main")

	// The job: actions/checkout with fetch-depth 1, then its pem steps.
	ci := filepath.Join(root, "ci")
	gitcli.Run(t, root, "clone", "-q", "--depth=1", url, ci)
	if code, out, errs := runPem(t, "--knowledge", ci, "sync", "--state-only"); code != 0 || !strings.Contains(out, "nothing to push") {
		t.Fatalf("take the state: %d %s %s", code, out, errs)
	}
	if code, out, errs := runPem(t, "--knowledge", ci, "consolidate", "--now", "2025-06-02"); code != 0 || !strings.Contains(out, "moved 61 files") {
		t.Fatalf("consolidate: %d %s %s", code, out, errs) // 60 traces and traces/.gitkeep of the generated tree
	}
	consolidation := gitcli.Run(t, ci, "rev-parse", "HEAD")
	want := append(diskTraces(ci), save(2)) // the live traces after it, and one during the job
	sort.Strings(want)
	if code, out, errs := runPem(t, "--knowledge", ci, "sync", "--state-only"); code != 0 || !strings.Contains(out, "1 local commit(s) replayed") || !strings.Contains(out, "pushed") {
		t.Fatalf("push the state: %d %s %s", code, out, errs)
	}
	if got := gitcli.Run(t, bare, "rev-parse", "main"); got != mainBefore {
		t.Fatal("the job moved main: its changes go to the pull request")
	}
	if got := gitcli.Run(t, ci, "rev-parse", "HEAD"); got != consolidation {
		t.Fatal("the state push moved the job's branch")
	}
	remote := gitcli.Run(t, bare, "ls-tree", "-r", "--name-only", state)
	var got []string
	for _, l := range strings.Split(remote, "\n") {
		if strings.HasPrefix(l, "traces/") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(remote, "experience/agent.example/agent-task.yaml") {
		t.Fatalf("the remote state's traces:\n%s\nwant the job's live traces and the agent's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The pull request is merged (as the branch the job pushed).
	gitcli.Run(t, ci, "push", "-q", "origin", "HEAD:refs/heads/main")
	if got := gitcli.Run(t, bare, "ls-tree", "-r", "--name-only", "main"); strings.Contains(got, "traces/") || strings.Contains(got, "experience/") {
		t.Fatalf("main after the merge still tracks state files:\n%.500s", got)
	}
	if code, out, errs := runPem(t, "--knowledge", agent, "sync"); code != 0 || !strings.Contains(out, "remote commits taken") {
		t.Fatalf("agent sync after the merge: %d %s %s", code, out, errs)
	}
	for _, l := range strings.Split(remote, "\n") {
		if _, err := os.Stat(filepath.Join(agent, l)); err != nil {
			t.Errorf("the agent lost %s from disk: %v", l, err)
		}
	}
	if out := gitcli.Run(t, agent, "status", "--porcelain"); out != "" {
		t.Errorf("agent's git status:\n%s", out)
	}
}

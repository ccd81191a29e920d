package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/engine/mcp"
)

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestToolsListedOnlyWhenTheyWork(t *testing.T) {
	eng := openEngine(t, newTree(t))
	base := []string{"experience_feedback", "experience_list", "experience_memory", "experience_query", "experience_save"}
	if got := toolNames(t, connectInProcess(t, eng, nil)); !slices.Equal(got, base) {
		t.Errorf("without DeepLearn: tools %v, want %v", got, base)
	}
	dl := func(context.Context, string, string, bool) (any, error) { return map[string]any{"proposals": 0}, nil }
	got := toolNames(t, connectInProcess(t, eng, &mcp.Options{DeepLearn: dl}))
	want := []string{"experience_deep_learn", "experience_feedback", "experience_list", "experience_memory", "experience_query", "experience_save"}
	if !slices.Equal(got, want) {
		t.Errorf("with DeepLearn: tools %v, want %v", got, want)
	}
}

func TestToolDescriptionsTeachTheWorkflow(t *testing.T) {
	cs := connectInProcess(t, openEngine(t, newTree(t)), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"experience_query":  {"BEFORE", "tier", "P1", "experience_save"},
		"experience_save":   {"AFTER", "failed", "facts", "known_blockers", "trace"},
		"experience_memory": {"## Memory", "experience_save"},
		"experience_list":   {"experience_query"},
	}
	for _, tl := range res.Tools {
		for _, w := range want[tl.Name] {
			if !strings.Contains(tl.Description, w) {
				t.Errorf("%s description lacks %q", tl.Name, w)
			}
		}
		schema, _ := tl.InputSchema.(map[string]any)
		if schema["type"] != "object" {
			t.Errorf("%s input schema type = %v", tl.Name, schema["type"])
		}
		if props, _ := schema["properties"].(map[string]any); len(props) == 0 {
			t.Errorf("%s input schema has no properties", tl.Name)
		}
	}
	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "experience_query") || !strings.Contains(got, "experience_save") {
		t.Errorf("instructions do not teach the workflow: %q", got)
	}
}

func TestBadArgumentsAreErrorResultsAndWriteNothing(t *testing.T) {
	dir := newTree(t)
	cs := connectInProcess(t, openEngine(t, dir), nil)
	u := "https://github.com/pemdev/pem"
	cases := []struct {
		name string
		tool string
		args any
		hint string // the error text must say this
	}{
		{"url wrong type", "experience_save", map[string]any{"url": 123}, "url must be a string"},
		{"url missing", "experience_save", map[string]any{"intent": "x"}, "url is required"},
		{"url without host", "experience_save", map[string]any{"url": "/issues", "intent": "x"}, "bad URL"},
		{"url empty host", "experience_save", map[string]any{"url": "https:///issues"}, "bad URL"},
		{"url bad scheme", "experience_save", map[string]any{"url": "ftp://example.com/x"}, "not http or https"},
		{"trace invalid JSON string", "experience_save", map[string]any{"url": u, "trace": `{"steps": [`}, "not valid JSON"},
		{"trace a number", "experience_save", map[string]any{"url": u, "trace": 42}, "trace must be a JSON object"},
		{"trace an array", "experience_save", map[string]any{"url": u, "trace": []any{1}}, "trace must be a JSON object"},
		{"trace unknown field", "experience_save", map[string]any{"url": u, "trace": map[string]any{"stepz": []any{}}}, "stepz"},
		{"trace bad action", "experience_save", map[string]any{"url": u, "trace": map[string]any{"steps": []any{map[string]any{"action": "teleport"}}}}, "teleport"},
		{"intent traversal", "experience_save", map[string]any{"url": u, "intent": "../../etc/passwd"}, "path traversal"},
		{"intent traversal backslash", "experience_query", map[string]any{"url": u, "intent": `..\..\secrets`}, "path traversal"},
		{"trace intent traversal", "experience_save", map[string]any{"url": u, "trace": map[string]any{"intent": "a/../../b"}}, "path traversal"},
		{"intent multi-line", "experience_save", map[string]any{"url": u, "intent": "a\nb"}, "one line"},
		{"facts unknown key", "experience_save", map[string]any{"url": u, "facts": `{"bogus": 1}`}, "bogus"},
		{"facts a list", "experience_save", map[string]any{"url": u, "facts": []any{"x"}}, "facts must be a JSON object"},
		{"facts invalid JSON", "experience_save", map[string]any{"url": u, "facts": "{selectors:"}, "not valid JSON"},
		{"outcome", "experience_save", map[string]any{"url": u, "outcome": "maybe", "trace": map[string]any{"steps": []any{map[string]any{"action": "wait"}}}}, "success or failure"},
		{"empty save", "experience_save", map[string]any{"url": u}, "nothing to save"},
		{"feedback bad verdict", "experience_feedback", map[string]any{"trace": "01M8RM2688R3S5GJY95AQDNEMP", "verdict": "maybe"}, "right or wrong"},
		{"feedback unknown trace", "experience_feedback", map[string]any{"trace": "01M8RM2688R3S5GJY95AQDNEMP", "verdict": "right"}, "unknown trace"},
		{"feedback not an id", "experience_feedback", map[string]any{"trace": "abc", "verdict": "right"}, "not a trace id"},
		{"unknown argument", "experience_save", map[string]any{"url": u, "colour": "red"}, `unknown argument "colour"`},
		{"two spellings", "experience_save", map[string]any{"url": u, "task_type": "a", "taskType": "b"}, "same argument"},
		{"arguments not an object", "experience_query", []any{u}, "must be a JSON object"},
		{"query no url", "experience_query", map[string]any{}, "url is required"},
		{"query intent wrong type", "experience_query", map[string]any{"url": u, "intent": true}, "intent must be a string"},
		{"list page not a number", "experience_list", map[string]any{"page": "abc"}, "page must be an integer"},
		{"list page fraction", "experience_list", map[string]any{"page": 1.5}, "page must be an integer"},
		{"list page size", "experience_list", map[string]any{"pageSize": 1000}, "page size"},
		{"list page zero-based", "experience_list", map[string]any{"page": -1}, "pages start at 1"},
		{"memory negative", "experience_memory", map[string]any{"url": u, "max_chars": -5}, "max_chars"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, cs, c.tool, c.args)
			text := resultText(t, res)
			if !res.IsError {
				t.Fatalf("want an isError result, got %s", text)
			}
			if !strings.Contains(text, c.hint) {
				t.Errorf("error %q does not say %q", text, c.hint)
			}
			if !strings.Contains(text, "Fix the arguments") {
				t.Errorf("error %q does not tell the model to fix the call", text)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			if sc["kind"] != "invalid_arguments" || sc["tool"] != c.tool {
				t.Errorf("structured content = %v", res.StructuredContent)
			}
		})
	}
	if files := treeFiles(t, dir); len(files) != 0 {
		t.Errorf("bad calls wrote %v", files)
	}
	// The session is still healthy.
	var r engine.Recall
	ok(t, call(t, cs, "experience_query", map[string]any{"url": u}), &r)
	if r.Tier != engine.P5 {
		t.Errorf("tier %s, want P5 on an empty tree", r.Tier)
	}
}

func TestUnknownToolIsAProtocolError(t *testing.T) {
	cs := connectInProcess(t, openEngine(t, newTree(t)), nil)
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "experience_delete", Arguments: map[string]any{}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	if we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(we.Message, "experience_delete") {
		t.Errorf("got code %d %q, want %d naming the tool", we.Code, we.Message, jsonrpc.CodeInvalidParams)
	}
	// deep-learn is unknown when not provided.
	_, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "experience_deep_learn", Arguments: map[string]any{"url": "https://a.com"}})
	if !errors.As(err, &we) {
		t.Fatalf("experience_deep_learn without DeepLearn: want a JSON-RPC error, got %v", err)
	}
}

func TestPanicInHandlerBecomesErrorResult(t *testing.T) {
	var calls int
	var mu sync.Mutex
	dl := func(_ context.Context, url, intent string, force bool) (any, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			var m map[string]int
			m["boom"]++ // a nil-map panic, like a real bug
		}
		return map[string]any{"url": url, "intent": intent, "force": force}, nil
	}
	cs := connectInProcess(t, openEngine(t, newTree(t)), &mcp.Options{DeepLearn: dl})
	args := map[string]any{"url": "https://github.com/pemdev/pem", "intent": "count issues", "force": "true"}
	res := call(t, cs, "experience_deep_learn", args)
	if text := resultText(t, res); !res.IsError || !strings.Contains(text, "failed inside pem") {
		t.Fatalf("panic: want an isError result, got %v %s", res.IsError, text)
	}
	var got map[string]any
	ok(t, call(t, cs, "experience_deep_learn", args), &got)
	if got["force"] != true || got["intent"] != "count issues" {
		t.Errorf("after the panic: %v", got)
	}
}

// A deep-learn of an entry nothing is known about is "not found", not an
// internal failure to retry.
func TestDeepLearnNotFound(t *testing.T) {
	dl := func(context.Context, string, string, bool) (any, error) {
		return nil, fmt.Errorf("%w: no entry for nothing.example", engine.ErrNotFound)
	}
	cs := connectInProcess(t, openEngine(t, newTree(t)), &mcp.Options{DeepLearn: dl})
	res := call(t, cs, "experience_deep_learn", map[string]any{"url": "https://nothing.example/"})
	text := resultText(t, res)
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || sc["kind"] != "not_found" || !strings.Contains(text, "no entry for nothing.example") || strings.Contains(text, "retry") {
		t.Fatalf("want an isError result of kind not_found, got %v %v %s", res.IsError, sc, text)
	}
}

func TestConcurrentCalls(t *testing.T) {
	dir := newTree(t)
	cs := connectInProcess(t, openEngine(t, dir), nil)
	const n = 100
	u := "https://github.com/pemdev/pem/issues"
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res *sdk.CallToolResult
			var err error
			switch i % 4 {
			case 0, 1:
				res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "experience_save", Arguments: map[string]any{
					"url": u, "intent": "count open issues", "session": fmt.Sprintf("s%d", i),
					"trace": map[string]any{"steps": []any{map[string]any{"action": "click", "selector": "#issues"}}},
				}})
			case 2:
				res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "experience_query", Arguments: map[string]any{"url": u, "intent": "count open issues"}})
			default:
				res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "experience_list", Arguments: map[string]any{"filter": "github"}})
			}
			if err != nil {
				errs <- err
				return
			}
			if res.IsError {
				errs <- fmt.Errorf("call %d: %v", i, res.Content)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var r engine.Recall
	ok(t, call(t, cs, "experience_query", map[string]any{"url": u, "intent": "count open issues"}), &r)
	if r.SuccessCount != n/2 {
		t.Errorf("success_count %d after %d concurrent saves", r.SuccessCount, n/2)
	}
	if files := treeFiles(t, dir); len(files) != n/2 {
		t.Errorf("%d files written, want %d traces", len(files), n/2)
	}
}

// failingFacts is a real store whose facts writes fail, as a full disk would.
type failingFacts struct{ engine.Store }

func (failingFacts) PutFacts(context.Context, *engine.Facts) (string, error) {
	return "", errors.New("write facts/x.yaml: no space left on device")
}

func TestSaveThatFailsAfterTheTraceSaysSo(t *testing.T) {
	dir := newTree(t)
	eng := openEngine(t, dir)
	cs := connectInProcess(t, &engine.Engine{Store: failingFacts{eng.Store}}, nil)
	res := call(t, cs, "experience_save", map[string]any{
		"url": "https://example.com/a", "intent": "read it", "facts": map[string]any{"anti_patterns": []any{"x"}},
	})
	text := resultText(t, res)
	if !res.IsError || !strings.Contains(text, "was saved as traces/example.com/") || !strings.Contains(text, "Do not save this run again") {
		t.Fatalf("partial save: %v %s", res.IsError, text)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["kind"] != "partial" {
		t.Errorf("kind %v", sc["kind"])
	}
	if files := treeFiles(t, dir); len(files) != 1 || !strings.HasPrefix(files[0], "traces/") {
		t.Errorf("files %v, want the one trace", files)
	}
}

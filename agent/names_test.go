package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestTaskNames: the proper names of a task are the capitalised words
// inside a sentence, not its first word, a literal or an identifier.
func TestTaskNames(t *testing.T) {
	for task, want := range map[string][]string{
		"What is the special loop variable called in Django?":           {"django"},
		"Which Python version does Jinja support?":                      {"python", "jinja"},
		"When was Werkzeug version 2.2.1 released?":                     {"werkzeug"},
		"How many stars does the repository have?":                      nil,
		"Which method of Environment.overlay copies it? Use maxTurns.":  nil,
		"What does the README say? Install it from PyPI.":               nil,
		"Where is SECRET_KEY set in Flask (the “Config” object)?":       {"flask", "config"},
		"Find the install command. Then open the Getting Started guide": {"start"}, // "getting": a stop word
	} {
		if got := taskNames(task); !slices.Equal(got, want) {
			t.Errorf("taskNames(%q) = %q, want %q", task, got, want)
		}
	}
}

// TestReadPageNeedsTheTasksNames: a block that answers the task's words
// but about another thing than the task's proper name (Jinja's loop
// variable, asked for Django's) is not read; the block under the name's
// heading is, and so is one whose page title carries the name.
func TestReadPageNeedsTheTasksNames(t *testing.T) {
	task := "What is the special loop variable called in Django?"
	jinja := Block{Selector: "#for-loop", Tag: "p", Text: "Inside of a for-loop block, the special variable called loop holds the loop's state.",
		Under: "Template Designer Documentation" + HeadingSep + "List of Control Structures" + HeadingSep + "For"}
	django := Block{Selector: "#django-loops", Tag: "p",
		Text:  "In Django, the special variable for the loop is called forloop. In Jinja, it is called loop.",
		Under: "Switching from other Template Engines" + HeadingSep + "Django" + HeadingSep + "Loops"}
	g := parseGoal(task, "http://127.0.0.1:8080/html/templates.html")
	if !slices.Equal(g.names, []string{"django"}) {
		t.Fatalf("names %q", g.names)
	}
	s := &State{Task: task, Title: "Template Designer Documentation — Jinja", Blocks: []Block{jinja}}
	if pick, ok := readPage(s, g); ok {
		t.Fatalf("read %v on a page that never names Django", pick.sels)
	}
	unnamed := g
	unnamed.names = nil
	if _, ok := readPage(s, unnamed); !ok {
		t.Fatal("without the name rule the block is not read either: the test proves nothing")
	}
	s.Blocks = []Block{jinja, django}
	if pick, ok := readPage(s, g); !ok || !slices.Equal(pick.sels, []string{"#django-loops"}) {
		t.Fatalf("readPage = %v, %v; want the Django section's block", pick.sels, ok)
	}
	// The name in the page's title is the block's context.
	s = &State{Task: task, Title: "Django templates", Blocks: []Block{jinja}}
	if _, ok := readPage(s, g); !ok {
		t.Fatal("a block on a page titled with the name was not read")
	}
}

// TestBestValueNeedsTheTasksNames: a labelled value whose label carries
// the task's words but not its proper name is no answer, unless the page's
// title names it.
func TestBestValueNeedsTheTasksNames(t *testing.T) {
	g := parseGoal("What is the loop variable called in Django?", "http://127.0.0.1:8080/html/templates.html")
	labels := []LabelValue{{Label: "loop variable", Value: "loop", Selector: "#v"}}
	if best, _, _ := bestValue(labels, g, "Template Designer Documentation — Jinja"); best != nil {
		t.Fatalf("bestValue = %+v on a page that never names Django", best)
	}
	unnamed := g
	unnamed.names = nil
	if best, _, _ := bestValue(labels, unnamed, ""); best == nil {
		t.Fatal("without the name rule the value is not picked either: the test proves nothing")
	}
	if best, _, _ := bestValue(labels, g, "Django templates"); best == nil {
		t.Fatal("a value on a page titled with the name was not picked")
	}
	labels = append(labels, LabelValue{Label: "Django's loop variable", Value: "forloop", Selector: "#d"})
	if best, _, _ := bestValue(labels, g, ""); best == nil || best.Value != "forloop" {
		t.Fatalf("bestValue = %+v, want Django's", best)
	}
}

// TestWeakLabelsAnswerNothing: on an API page, a labelled value whose
// label is an API name the task does not name, or that carries fewer than
// half of the asked-for words, is not the answer (Debian's Click docs:
// "CompletionItem" for which shells complete, "the Command for this
// context." for which class invokes commands in tests; attrs' "attr.field()¶"
// for which function returns the fields). A label that carries the asked
// words still answers.
func TestWeakLabelsAnswerNothing(t *testing.T) {
	page := func(task string, labels ...LabelValue) *State {
		return &State{Task: task, URL: "http://127.0.0.1:8080/html/api.html", Title: "API — Docs",
			Labels: labels, Blocks: []Block{{Selector: "#p", Tag: "p", Text: "Unrelated prose.", Under: "API"}}}
	}
	for _, c := range []struct {
		task  string
		label LabelValue
		want  bool // answered from the label
	}{
		{"Which shells does it support for tab completion?", LabelValue{Label: "click.shell_completion.CompletionItem", Value: "CompletionItem", Selector: "#c"}, false},
		{"Which class invokes commands as command line scripts in tests?", LabelValue{Label: "command", Value: "the Command for this context.", Selector: "#k"}, false},
		{"Which parameter sets the prefix for automatic environment variables?", LabelValue{Label: "Parameters", Value: "mode (str) – encoding (Optional[str])", Selector: "#p"}, false},
		// A Sphinx signature's label, its permalink glyph after it (attrs: attr.field()).
		{"Which function returns the counters of a Tally record?", LabelValue{Label: "tally.counter()\uf0c1", Value: "Old import path for tally.counter.", Selector: "#o"}, false},
		{"What does shell_completion.CompletionItem hold?", LabelValue{Label: "shell_completion.CompletionItem", Value: "A completion value.", Selector: "#c"}, true},
		{"What is the default branch?", LabelValue{Label: "Default branch", Value: "main", Selector: "#b"}, true},
	} {
		s := page(c.task, c.label)
		a, got := answeredFrom(t, s, c.label)
		if got != c.want {
			t.Errorf("%q with label %q: next action %+v; answered from the label: %v, want %v", c.task, c.label.Label, a, got, c.want)
		}
	}
}

// TestPartialNeedsTheWholeItem: a partial value whose label has none of the
// asked words answers only when it names the whole item — "Saturday" for
// the opening hours on Saturday, not "response" for the parameter that
// tells Requests to stop waiting for a response (Debian's Requests docs);
// for "which function (class, …)", a label with the kind's word.
func TestPartialNeedsTheWholeItem(t *testing.T) {
	for _, c := range []struct {
		task  string
		label LabelValue
		turn  int
		want  bool
	}{
		{"What are the opening hours on Saturday?", LabelValue{Label: "Saturday", Value: "10:00–16:00", Selector: "#s"}, 2, true},
		{"Which parameter tells Requests to stop waiting for a response?", LabelValue{Label: "response", Value: "The response generated from a Request.", Selector: "#r"}, 25, false},
		{"Which parameter tells Requests to stop waiting for a response?", LabelValue{Label: "parameter to stop waiting", Value: "timeout", Selector: "#t"}, 25, true},
		// A label without the kind's word names what the function is
		// about, not the function (attrs: "fields: list[attrs.Attribute]"
		// in a hook's signature, for which function returns the fields).
		{"Which function returns the counters of a Tally record?", LabelValue{Label: "counters", Value: "list[tally.Counter]", Selector: "#c"}, 2, false},
		{"Which function returns the counters of a Tally record?", LabelValue{Label: "function for counters", Value: "tally.counters", Selector: "#f"}, 2, true},
	} {
		s := &State{Task: c.task, URL: "http://127.0.0.1:8080/", Title: "Requests documentation", Labels: []LabelValue{c.label}, Turn: c.turn, MaxTurns: 25}
		a, got := answeredFrom(t, s, c.label)
		if got != c.want {
			t.Errorf("%q with label %q: next action %+v; answered from the label: %v, want %v", c.task, c.label.Label, a, got, c.want)
		}
	}
}

// answeredFrom runs the explore planner's next turn on s and reports
// whether it answers from label (extracts it, or is done with its value).
func answeredFrom(t *testing.T, s *State, label LabelValue) (Action, bool) {
	t.Helper()
	a, err := NewExplore().Next(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return a, a.Tool == "extract" && a.Value == label.Label || a.Tool == "done" && a.Value == label.Value
}

// TestReadPageSkipsWholeDocuments: a page's source file shown in one pre
// (Sphinx's "Page source", 6 KB of reStructuredText) holds the asked words
// and the answer somewhere inside, but it is the document, not an answer;
// the same words in a block of the rendered page are read (an option such
// as --reverse-filter names what "which … option" asks for).
func TestReadPageSkipsWholeDocuments(t *testing.T) {
	task := "Which shell option excludes entries that have a number in a given range?"
	usage := "-F LOW HIGH, --reverse-filter LOW HIGH: used for excluding the entries that have a number falling in the given range."
	source := Block{Selector: "pre", Tag: "pre", Text: ".. _shell:\n\nShell Script\n============\n\n" + usage + "\n" + strings.Repeat("More of the page's source text, section after section.\n", 40)}
	g := parseGoal(task, "http://127.0.0.1:8080/shell.html")
	s := &State{Task: task, Title: "shell.rst.txt", Blocks: []Block{source}}
	if pick, ok := readPage(s, g); ok {
		t.Fatalf("read %v: a %d-character source file as the answer", pick.sels, len(source.Text))
	}
	short := source
	short.Text = usage
	s.Blocks = []Block{short}
	if _, ok := readPage(s, g); !ok {
		t.Fatal("the same words in a short block are not read either: the test proves nothing")
	}
}

// TestExtractedDocumentIsNoAnswer: a text block extracted from a listing
// (the planner's fallback when no block or label reads) that turns out to
// be a whole document is not answered with; the planner moves on.
func TestExtractedDocumentIsNoAnswer(t *testing.T) {
	task := "Which shell option excludes entries that have a number in a given range?"
	const u = "http://127.0.0.1:8080/_sources/shell.rst.txt"
	doc := "-F LOW HIGH, --reverse-filter LOW HIGH: excludes entries in the range.\n" + strings.Repeat("More of the page's source text.\n", 80)
	for _, long := range []bool{true, false} {
		text := doc
		if !long {
			text = doc[:120]
		}
		s := &State{Task: task, URL: u, Title: "shell.rst.txt", Turn: 3, MaxTurns: 25, History: []Turn{
			{Action: Action{Tool: "navigate", Value: u}, URL: u},
			{Action: Action{Tool: "get_elements", Selector: textBlocks}, Result: ToolResult{ExtractedContent: `pre pre "-F LOW HIGH, --reverse-filter LOW HIGH: excludes entries in the range."`}, URL: u},
			{Action: Action{Tool: "extract", Selector: "pre"}, Result: ToolResult{ExtractedContent: text}, URL: u},
		}}
		a, err := NewExplore().Next(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if done := a.Tool == "done" && a.Value == strings.TrimSpace(text); done == long {
			t.Errorf("extracted %d characters: next action %s %q (done with it: %v)", len(text), a.Tool, capText(a.Value, 60), done)
		}
	}
}

// TestCodeExampleNamesTheAskedFunction: a code example answers "which
// function …" only when it names a function carrying the asked words as
// the task writes them — one that merely uses tally.counter (and prints
// "<function …>") does not say which function returns the counters
// (Debian's attrs docs: attrs.field for attrs.fields). Read by the planner
// and checked in CheckAnswer alike.
func TestCodeExampleNamesTheAskedFunction(t *testing.T) {
	task := "Which function returns the counters of a Tally record?"
	uses := Block{Selector: "#uses", Tag: "pre", Under: "API Reference" + HeadingSep + "Counters",
		Text: ">>> @tally.record\n... class Stock:\n...     items = tally.counter(start=1)\n>>> Stock.__init__\n<function Stock.__init__>"}
	names := Block{Selector: "#names", Tag: "pre", Under: "API Reference" + HeadingSep + "Counters",
		Text: ">>> tally.counters(Stock)  # the function that returns a record's counters\n(Counter(name='items', start=1),)"}
	g := parseGoal(task, "http://127.0.0.1:8080/tally/index.html")
	s := &State{Task: task, Title: "API Reference — Tally 4.0 documentation", Blocks: []Block{uses}}
	if pick, ok := readPage(s, g); ok {
		t.Fatalf("read %v: a code example that only uses tally.counter", pick.sels)
	}
	s.Blocks = []Block{uses, names}
	if pick, ok := readPage(s, g); !ok || !slices.Equal(pick.sels, []string{"#names"}) {
		t.Fatalf("readPage = %v, %v; want the example that names tally.counters", pick.sels, ok)
	}
	if why := CheckAnswer(task, "http://127.0.0.1:8080/", uses.Text, AnswerSource{}); why == "" {
		t.Error("CheckAnswer passed a code example that only uses tally.counter")
	}
	if why := CheckAnswer(task, "http://127.0.0.1:8080/", names.Text, AnswerSource{}); why != "" {
		t.Errorf("CheckAnswer refused the example that names tally.counters: %s", why)
	}
}

// TestAPIAnswerNamesOne: an answer to "which function (class, …)" names
// one — "the API reference" names none; and a parameter's entry in a field
// list (field_transformer (callable) – a function that is called with …)
// answers which parameter, not which function (Debian's attrs docs).
func TestAPIAnswerNamesOne(t *testing.T) {
	const u = "http://127.0.0.1:8080/"
	entry := "on_count (Optional[callable]) – A function that is called with the record and all its counters before it is built."
	for _, c := range []struct {
		task, answer string
		ok           bool
	}{
		{"Which function returns the counters of a Tally record?", "the API reference", false},
		{"Which function returns the counters of a Tally record?", entry, false},
		{"Which parameter is called with all the counters of a record?", entry, true},
		{"Which function returns the counters of a Tally record?", "Call the tally.counters() function with the record class.", true},
		{"Which class finds templates in a list of directories?", "Templates are found by the TemplateFinder class.", true},
		{"Which argument stops the search early?", "Pass the limit argument.", true},
		{"Which environment variable sets the PIN?", "TALLY_PIN", true},
	} {
		why := CheckAnswer(c.task, u, c.answer, AnswerSource{})
		if (why == "") != c.ok {
			t.Errorf("%q answered %q: check %q, want passed %v", c.task, c.answer, why, c.ok)
		}
	}
}

// TestDatedVersionIsNoRelease: "as of version 3.2.0" dates a change; it
// answers which version added something, not what the current release is
// (Debian's attrs docs: the __version_info__ paragraph for attrs' current
// release). "What is the current release of …" asks for a version.
func TestDatedVersionIsNoRelease(t *testing.T) {
	const u = "http://127.0.0.1:8080/"
	dated := "Code written for old and new releases can check what it runs on: the tally module has a __version_info__ attribute as of version 3.2.0."
	if got := AskedType("What is the current release of Tally?"); got != VersionAnswer {
		t.Errorf("AskedType = %q, want version", got)
	}
	for _, c := range []struct {
		task, answer string
		ok           bool
	}{
		{"What is the current release of Tally?", dated, false},
		{"What is the current release of Tally?", "New in version 3.2.0: counters.", false},
		{"What is the current release of Tally?", "Release 4.0.1 (what's new?)", true},
		{"Which version added the __version_info__ attribute?", dated, true},
		{"Since which version does Tally have __version_info__?", dated, true},
	} {
		why := CheckAnswer(c.task, u, c.answer, AnswerSource{})
		if (why == "") != c.ok {
			t.Errorf("%q answered %q: check %q, want passed %v", c.task, c.answer, why, c.ok)
		}
	}
}

// TestAPITermIsReadWithItsBlock: on an API page, the definition under a
// term (dt: tally.record(cls)) describes the term; for "which decorator
// (function, …)" the term is read with it — the definition alone ("A class
// decorator that adds counting methods using tally.counter") does not say
// which decorator, and its one identifier is another API's (Debian's attrs
// docs: attr.s's definition, naming attr.ib, for which decorator makes an
// attrs class).
func TestAPITermIsReadWithItsBlock(t *testing.T) {
	task := "Which decorator turns a class into a Tally record?"
	term := Block{Selector: "#tally-record", Tag: "dt", Text: "tally.record(cls, *, slots=True)", Under: "API Reference" + HeadingSep + "Core"}
	def := Block{Selector: "#tally-record-dd", Tag: "p", Text: "A class decorator that turns a class into a record, adding counting methods using tally.counter.",
		Under: "API Reference" + HeadingSep + "Core" + HeadingSep + term.Text}
	g := parseGoal(task, "http://127.0.0.1:8080/tally/index.html")
	s := &State{Task: task, Title: "API Reference — Tally 4.0 documentation", Blocks: []Block{term, def}}
	if pick, ok := readPage(s, g); !ok || !slices.Equal(pick.sels, []string{"#tally-record", "#tally-record-dd"}) {
		t.Fatalf("readPage = %v, %v; want the term and its definition", pick.sels, ok)
	}
	// Any "which …" question: the term with its definition.
	vtask := "Which checker makes sure a Tally record holds counters?"
	vterm := Block{Selector: "#has-counters", Tag: "dt", Text: "tally.checks.has_counters(cls)", Under: "API Reference" + HeadingSep + "Checks"}
	vdef := Block{Selector: "#has-counters-dd", Tag: "p", Text: "A checker that makes sure the record holds counters and raises a TypeError if it holds none.",
		Under: "API Reference" + HeadingSep + "Checks" + HeadingSep + vterm.Text}
	vs := &State{Task: vtask, Title: "API Reference — Tally 4.0 documentation", Blocks: []Block{vterm, vdef}}
	if pick, ok := readPage(vs, parseGoal(vtask, "http://127.0.0.1:8080/tally/index.html")); !ok || !slices.Equal(pick.sels, []string{"#has-counters", "#has-counters-dd"}) {
		t.Fatalf("readPage = %v, %v; want the checker's term and its definition", pick.sels, ok)
	}
	// A question that asks for no API kind reads the definition alone.
	g = parseGoal("What does a record class add?", "http://127.0.0.1:8080/tally/index.html")
	s.Task = "What does a record class add?"
	if pick, ok := readPage(s, g); ok && slices.Contains(pick.sels, "#tally-record") {
		t.Fatalf("readPage = %v: the term read for a task that asks for no API name", pick.sels)
	}
}

// TestCallNamesNoAttribute: a sentence that names only functions, written
// as calls, does not answer which attribute (parameter, …): bidict's docs
// answered "Which attribute of a bidict gives access to the inverse
// items?" with namedbidict()'s description, recorded as a success and
// served at P2, and once that was refused with a paragraph naming the class
// BidictBase. The attribute itself, a constant for "which setting", a class
// for "which class" or a function for "which function" still answer.
func TestCallNamesNoAttribute(t *testing.T) {
	const u = "http://127.0.0.1:8080/other-bidict-types.html"
	named := "bidict.namedbidict(), inspired by collections.namedtuple(), allows you to easily generate a new bidirectional mapping type with custom attribute-based access to forward and inverse mappings:"
	for _, c := range []struct {
		task, answer string
		ok           bool
	}{
		{"Which attribute of a bidict gives access to the inverse items?", named, false},
		{"Which attribute of a bidict gives access to the inverse items?", "A bidict maintains a special bidict.inverse attribute giving access to inverse items.", true},
		// The next run's answer: a class's name is no attribute either.
		{"Which attribute of a bidict gives access to the inverse items?", "BidictBase realizes when a subclass is not its own inverse, and dynamically generates the inverse class for you: ElementBySymbolBidictInv.", false},
		{"Which setting names the session cookie?", "Set SESSION_COOKIE_NAME to change it.", true},
		{"Which class of bidict keeps the order of its items?", "OrderedBidict is a mutable bidirectional mapping that preserves the ordering of its items.", true},
		{"Which parameter stops the waiting?", "Call requests.get() with the timeout parameter.", true},
		{"Which function generates a bidirectional mapping type with attribute-based access?", named, true},
	} {
		why := apiAnswer("", c.answer, false, parseGoal(c.task, u))
		if (why == "") != c.ok {
			t.Errorf("%q answered with %q: %q, want ok %v", c.task, capText(c.answer, 50), why, c.ok)
		}
	}
}

// TestSignatureHoldsNoCount: an API signature's numbers are parameters'
// defaults, not the count a "how many" asks for. Logbook's docs (a clean
// held-out site) answered "How many log records can Logbook write per
// second?" — not on the site — with the term "class
// logbook.StreamHandler(stream, level=0, …)", recorded as a success and
// served at P2. A version heading still answers a version question.
func TestSignatureHoldsNoCount(t *testing.T) {
	const task = "How many log records can Logbook write per second?"
	sig := "class logbook.StreamHandler(stream, level=0, format_string=None, encoding=None, filter=None, bubble=False)"
	dt := Block{Selector: "#logbook\\.StreamHandler", Tag: "dt", Text: sig, Under: "Handlers"}
	dd := Block{Selector: "#sh-dd", Tag: "dd", Text: "A handler class which writes logging records, appropriately formatted, to a stream.", Under: "Handlers" + HeadingSep + sig}
	s := &State{Task: task, URL: "http://127.0.0.1:8080/api/handlers.html", Title: "Handlers — Logbook", Blocks: []Block{dt, dd}}
	if pick, ok := readPage(s, parseGoal(task, s.URL)); ok {
		t.Fatalf("read %v: a signature's default as the count", pick.sels)
	}
	if why := CheckAnswer(task, s.URL, sig, AnswerSource{URL: s.URL, Headings: []string{sig}}); why == "" {
		t.Fatal("CheckAnswer passed a signature as the count")
	}
	vtask := "Which version dropped support for Python 3.6?"
	if why := CheckAnswer(vtask, s.URL, "Version 3.1.0", AnswerSource{URL: s.URL, Headings: []string{"Version 3.1.0"}}); why != "" {
		t.Fatalf("a version heading no longer answers a version question: %s", why)
	}
}

// TestCheckAnswerRefusesACodeExample: the answer check, which every planner
// and replay passes, refuses the attrs code example for "which function"
// as the page reader does — also now that a program's first line (an
// assignment) is no command to CodeLike.
func TestCheckAnswerRefusesACodeExample(t *testing.T) {
	const task = "Which function returns the fields of an attrs class?"
	code := "x = attrs.field(validator=attrs.validators.is_callable())\nprint(isinstance)"
	if why := CheckAnswer(task, "http://127.0.0.1:8080/", code, AnswerSource{}); !strings.Contains(why, "code example") {
		t.Fatalf("CheckAnswer = %q, want a code example refused", why)
	}
	if why := CheckAnswer(task, "http://127.0.0.1:8080/", "fields = attrs.fields(C)", AnswerSource{}); why != "" {
		t.Fatalf("a code example naming attrs.fields refused: %q", why)
	}
}

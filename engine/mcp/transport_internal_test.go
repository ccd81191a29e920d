package mcp

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestIDScanner(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" means no id
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"x"}`, `7`},
		{`{"jsonrpc":"2.0","id":"abc","method":"x"}`, `"abc"`},
		{`{"id": -12 , "method":"x"}`, `-12`},
		{`{"method":"x","params":{"id":1,"a":[1,2,{"id":3}]},"jsonrpc":"2.0","id":42}`, `42`},
		{`{"params":{"s":"a \"id\": 5 }"},"id":"q\"x"}`, `"q\"x"`},
		{`{"idx":1,"i":2}`, ``},
		{`{"id":null}`, ``},
		{`{"id":{"a":1}}`, ``},
		{`{"id":true}`, ``},
		{`[{"id":1}]`, ``},
		{`{"params":"` + strings.Repeat("x", 100000), ``}, // never reached
		{`{"id":` + strings.Repeat("9", 300) + `}`, ``},   // over the id cap
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 3, 1 << 20} { // any split of the input
			s := &idScanner{}
			in := []byte(c.in)
			for len(in) > 0 {
				n := min(chunk, len(in))
				s.feed(in[:n])
				in = in[n:]
			}
			if got := string(s.id()); got != c.want {
				t.Errorf("%.60s (chunks of %d): id %q, want %q", c.in, chunk, got, c.want)
			}
		}
	}
}

func TestReadLine(t *testing.T) {
	const max = 100
	long := `{"jsonrpc":"2.0","id":5,"params":"` + strings.Repeat("a", 300) + `"}`
	in := "first\r\n\n" + long + "\n  last-no-newline  "
	br := bufio.NewReaderSize(strings.NewReader(in), 16) // small buffer: lines span chunks
	var got []string
	for {
		line, over, err := readLine(br, max)
		switch {
		case over != nil:
			got = append(got, "OVER:"+string(over.scan.id()))
			if over.n != int64(len(long)+1) {
				t.Errorf("over.n = %d, want %d", over.n, len(long)+1)
			}
		default:
			got = append(got, string(line))
		}
		if err != nil {
			break
		}
	}
	want := []string{"first", "", "OVER:5", "last-no-newline"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"url": "url", "taskType": "task_type", "task_type": "task_type", "pageSize": "page_size",
		"maxChars": "max_chars", "intentFilter": "intent_filter", "page-size": "page_size", "TaskType": "task_type",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDocumentArgument(t *testing.T) {
	a, err := parseArgs([]byte(`{"trace":"  {\"steps\":[]}  ","facts":{"anti_patterns":["x"]},"empty":""}`), []string{"trace", "facts", "empty"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"trace": `{"steps":[]}`, "facts": `{"anti_patterns":["x"]}`, "empty": ``} {
		got, err := a.document(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, []byte(want)) {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

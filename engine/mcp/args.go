package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pemdev/pem/engine"
)

// errArgs marks arguments the model must fix; the message says how.
var errArgs = errors.New("invalid arguments")

func argErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errArgs, fmt.Sprintf(format, a...))
}

// args are a tool call's arguments with keys normalized to snake_case.
type args struct {
	m map[string]json.RawMessage
}

// parseArgs reads the arguments object. Keys may be snake_case or camelCase
// ("task_type" or "taskType"); a key that is not in allowed, or two spellings
// of one key, is an error naming the accepted keys.
func parseArgs(raw json.RawMessage, allowed []string) (*args, error) {
	a := &args{m: map[string]json.RawMessage{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return a, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, argErrorf("arguments must be a JSON object with the keys %s", strings.Join(allowed, ", "))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	from := map[string]string{}
	for _, k := range keys {
		s := snake(k)
		if !contains(allowed, s) {
			return nil, argErrorf("unknown argument %q: this tool accepts %s", k, strings.Join(allowed, ", "))
		}
		if prev, dup := from[s]; dup {
			return nil, argErrorf("arguments %q and %q are the same argument: send it once", prev, k)
		}
		from[s] = k
		if v := bytes.TrimSpace(m[k]); string(v) != "null" {
			a.m[s] = v
		}
	}
	return a, nil
}

// snake converts camelCase (engine.SnakeCase) and kebab-case to snake_case:
// "pageSize" → "page_size", "page-size" → "page_size".
func snake(s string) string { return engine.SnakeCase(strings.ReplaceAll(s, "-", "_")) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// str returns a string argument ("" when absent).
func (a *args) str(name string) (string, error) {
	v, ok := a.m[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", argErrorf("%s must be a string, got %s", name, kind(v))
	}
	return s, nil
}

// integer returns an integer argument (0 when absent); a string of digits is accepted.
func (a *args) integer(name string) (int, error) {
	v, ok := a.m[name]
	if !ok {
		return 0, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, argErrorf("%s must be an integer, got the string %q", name, s)
		}
		return n, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != float64(int(f)) {
		return 0, argErrorf("%s must be an integer, got %s", name, kind(v))
	}
	return int(f), nil
}

// boolean returns a boolean argument (false when absent); "true"/"false" strings are accepted.
func (a *args) boolean(name string) (bool, error) {
	v, ok := a.m[name]
	if !ok {
		return false, nil
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
			return b, nil
		}
	}
	return false, argErrorf("%s must be true or false, got %s", name, kind(v))
}

// document returns an argument that may be a JSON object or a string holding
// one, as the object's bytes (nil when absent or empty).
func (a *args) document(name string) ([]byte, error) {
	v, ok := a.m[name]
	if !ok {
		return nil, nil
	}
	switch v[0] {
	case '{':
		return v, nil
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, argErrorf("%s: %v", name, err)
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, nil
		}
		if !json.Valid([]byte(s)) {
			return nil, argErrorf("%s is a string but not valid JSON: pass %s as a JSON object, or as a string holding one JSON object", name, name)
		}
		return []byte(s), nil
	}
	return nil, argErrorf("%s must be a JSON object (or a string holding one), got %s", name, kind(v))
}

// kind names a JSON value's type for error messages.
func kind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + string(v)
}

// checkIntent refuses intent text that looks like a path escape. The engine
// slugs intents into safe file names anyway; an intent holding ".." is
// almost certainly a confused or hostile call, and the model should know.
func checkIntent(intent string) error {
	if strings.ContainsAny(intent, "\x00\r\n") {
		return argErrorf("intent must be one line of plain text, such as \"count open issues\"")
	}
	for _, part := range strings.FieldsFunc(intent, func(r rune) bool { return r == '/' || r == '\\' }) {
		if strings.TrimSpace(part) == ".." {
			return argErrorf("intent %q contains a path traversal (\"..\"): describe the task in words, such as \"count open issues\"", intent)
		}
	}
	return nil
}

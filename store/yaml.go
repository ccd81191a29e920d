package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/engine"
)

// Kinds of record, each with its own size cap on read and write.
const (
	KindTrace      = "trace"
	KindExperience = "experience"
	KindFacts      = "facts"
	KindConfig     = "config"
)

// Size caps per kind (DESIGN §2). A file over its cap is refused on read
// (ErrCorrupt) and never written (ErrTooLarge).
const (
	MaxTraceBytes      = 2 << 20
	MaxExperienceBytes = 8 << 20
	MaxFactsBytes      = 256 << 10
	MaxConfigBytes     = 64 << 10
)

// MaxDepth caps the nesting of a YAML document. pem's records nest at most 6
// levels; 64 leaves room for hand edits and refuses pathological input.
const MaxDepth = 64

// MaxBytes returns the size cap of a kind (the smallest cap for an unknown kind).
func MaxBytes(kind string) int {
	switch kind {
	case KindTrace:
		return MaxTraceBytes
	case KindExperience:
		return MaxExperienceBytes
	case KindFacts:
		return MaxFactsBytes
	default:
		return MaxConfigBytes
	}
}

// Marshal encodes v as canonical YAML: keys in struct order, map keys sorted,
// two-space indent, no anchors or aliases, times in UTC RFC 3339, one trailing
// newline. The same value always gives the same bytes.
func Marshal(v any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("encoding YAML: %v", r)
		}
	}()
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := canonicalize(&n); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return b.Bytes(), nil
}

// canonicalize rewrites timestamps in UTC and drops styles and comments that
// would make two encodings of one value differ.
func canonicalize(n *yaml.Node) error {
	n.Anchor, n.HeadComment, n.LineComment, n.FootComment = "", "", "", ""
	if n.Kind == yaml.AliasNode {
		return errors.New("encoding YAML: aliases are not allowed")
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!timestamp" {
		t, err := time.Parse(time.RFC3339Nano, n.Value)
		if err != nil {
			return fmt.Errorf("encoding YAML: timestamp %q: %w", n.Value, err)
		}
		n.Value = t.UTC().Format(time.RFC3339Nano)
	}
	for _, c := range n.Content {
		if err := canonicalize(c); err != nil {
			return err
		}
	}
	return nil
}

// Unmarshal decodes one record strictly: data must hold exactly one YAML
// document of at most MaxBytes(kind) bytes, nested at most MaxDepth levels,
// with no anchors or aliases and only fields v knows. Errors wrap
// engine.ErrCorrupt (the caller adds the path). It never panics.
func Unmarshal(data []byte, v any, kind string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the YAML decoder failed: %v", engine.ErrCorrupt, r)
		}
	}()
	if max := MaxBytes(kind); len(data) > max {
		return fmt.Errorf("%w: %d bytes, over the %s cap of %d", engine.ErrCorrupt, len(data), kind, max)
	}
	// First pass into a node tree: aliases stay unexpanded there, so an alias
	// bomb costs no more than its bytes and is refused before any expansion.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the file is empty", engine.ErrCorrupt)
		}
		return fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one YAML document", engine.ErrCorrupt)
	}
	if err := checkNode(&doc, 0); err != nil {
		return err
	}
	// Second pass: the typed decode, refusing unknown fields.
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	return nil
}

func checkNode(n *yaml.Node, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d levels", engine.ErrCorrupt, MaxDepth)
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return fmt.Errorf("%w: line %d: YAML anchors and aliases are not allowed", engine.ErrCorrupt, n.Line)
	}
	for _, c := range n.Content {
		if err := checkNode(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

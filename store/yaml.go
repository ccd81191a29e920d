package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pemdev/pem/engine"
)

// Kinds of record, each with its own size cap on read and write.
const (
	KindTrace      = "trace"
	KindExperience = "experience"
	KindFacts      = "facts"
	KindSite       = "site" // facts/<domain>/_site.yaml: capped as facts
	KindConfig     = "config"
	KindVerdict    = "verdict"
)

// Size caps per kind (DESIGN §2). A file over its cap is refused on read
// (ErrCorrupt) and never written (ErrTooLarge).
const (
	MaxTraceBytes      = 2 << 20
	MaxExperienceBytes = 8 << 20
	MaxFactsBytes      = 256 << 10
	MaxConfigBytes     = 64 << 10
	MaxVerdictBytes    = 16 << 10
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
	case KindFacts, KindSite:
		return MaxFactsBytes
	case KindVerdict:
		return MaxVerdictBytes
	default:
		return MaxConfigBytes
	}
}

// Marshal encodes v as canonical YAML: keys in struct order, map keys sorted,
// two-space indent, no anchors or aliases, times in UTC RFC 3339, one trailing
// newline. The same value always gives the same bytes.
//
// When every time in v is already in UTC (what pem's records hold), the
// value is encoded in one pass; otherwise it goes through a node tree whose
// timestamps are rewritten in UTC. Both give the same bytes for the same
// value (TestMarshalFastPathMatches). An experience, the record written in
// bulk, takes a hand-written encoder of the same bytes when it can
// (yamlenc.go).
func Marshal(v any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("encoding YAML: %v", r)
		}
	}()
	if x, ok := v.(*engine.Experience); ok {
		if b, ok := marshalExperience(x); ok {
			return b, nil
		}
	}
	if utcOnly(reflect.ValueOf(v), 0) {
		return encodeYAML(v)
	}
	return marshalNode(v)
}

// marshalNode is Marshal through a canonicalized node tree.
func marshalNode(v any) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := canonicalize(&n); err != nil {
		return nil, err
	}
	return encodeYAML(&n)
}

func encodeYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return b.Bytes(), nil
}

var (
	timeType = reflect.TypeOf(time.Time{})
	nodeType = reflect.TypeOf(yaml.Node{})
)

// utcOnly reports whether v holds no time outside UTC and nothing else the
// node path would rewrite (yaml.Node values, marshalers, interfaces, deep
// nesting): only then may it be encoded in one pass.
func utcOnly(v reflect.Value, depth int) bool {
	if depth > MaxDepth {
		return false
	}
	switch v.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		return utcOnly(v.Elem(), depth+1)
	case reflect.Interface:
		return v.IsNil()
	case reflect.Struct:
		t := v.Type()
		if t == timeType {
			tm := v.Interface().(time.Time)
			return tm.Location() == time.UTC || tm.IsZero()
		}
		if t == nodeType || reflect.PointerTo(t).Implements(marshalerType) || t.Implements(marshalerType) {
			return false
		}
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() && !utcOnly(v.Field(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() <= reflect.Complex128 || v.Type().Elem().Kind() == reflect.String {
			return true
		}
		for i := 0; i < v.Len(); i++ {
			if !utcOnly(v.Index(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		if k := v.Type().Elem().Kind(); k <= reflect.Complex128 || k == reflect.String {
			return true
		}
		it := v.MapRange()
		for it.Next() {
			if !utcOnly(it.Value(), depth+1) {
				return false
			}
		}
		return true
	}
	return true
}

var marshalerType = reflect.TypeOf((*yaml.Marshaler)(nil)).Elem()

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
	// The typed decode from the same node tree, refusing unknown fields.
	// yaml's KnownFields exists only on a Decoder (a second parse), so the
	// node tree is checked against v's type here instead; what this check
	// does not model (merge keys, inline fields) takes the second parse.
	switch err := knownFields(&doc, reflect.TypeOf(v), 0); {
	case errors.Is(err, errNeedsParse):
		dec = yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
		}
		return nil
	case err != nil:
		return err
	}
	if err := doc.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
	}
	return nil
}

var errNeedsParse = errors.New("needs the full decoder")

// structFields maps a struct type's YAML keys to their field types.
var structFields sync.Map // reflect.Type → map[string]reflect.Type, or errNeedsParse

func fieldsOf(t reflect.Type) (map[string]reflect.Type, error) {
	if v, ok := structFields.Load(t); ok {
		if m, ok := v.(map[string]reflect.Type); ok {
			return m, nil
		}
		return nil, errNeedsParse
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			structFields.Store(t, errNeedsParse)
			return nil, errNeedsParse
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	structFields.Store(t, m)
	return m, nil
}

// knownFields reports the first mapping key in n that names no field of
// the struct it decodes into, as yaml's KnownFields would.
func knownFields(n *yaml.Node, t reflect.Type, depth int) error {
	if depth > MaxDepth+1 {
		return errNeedsParse
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := knownFields(c, t, depth+1); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		switch t.Kind() {
		case reflect.Struct:
			if t == timeType || t == nodeType {
				return nil
			}
			fields, err := fieldsOf(t)
			if err != nil {
				return err
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind != yaml.ScalarNode || k.Value == "<<" {
					return errNeedsParse
				}
				ft, ok := fields[k.Value]
				if !ok {
					return fmt.Errorf("%w: yaml: unmarshal errors:\n  line %d: field %s not found in type %s", engine.ErrCorrupt, k.Line, k.Value, t)
				}
				if err := knownFields(n.Content[i+1], ft, depth+1); err != nil {
					return err
				}
			}
		case reflect.Map:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "<<" {
					return errNeedsParse
				}
				if err := knownFields(n.Content[i+1], t.Elem(), depth+1); err != nil {
					return err
				}
			}
		case reflect.Interface:
			return nil
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, c := range n.Content {
				if err := knownFields(c, t.Elem(), depth+1); err != nil {
					return err
				}
			}
		}
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

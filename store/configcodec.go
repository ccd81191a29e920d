package store

import (
	"reflect"
	"sync"

	"github.com/pemdev/pem/engine"
)

// The decoded cache's binary form of pem.yaml (decoded.go): once facts
// came from their cache, pem.yaml was the only YAML a query decoded, ~0.5
// ms of a CLI query's CPU (docs/performance.md, "Query, fifth round").
// engine.Config holds only numbers, bools, strings, slices and structs of
// them, so its codec walks the Go type by reflection (every field in
// order: nothing to keep in step by hand) and declines a type holding
// anything else (a map, a pointer, a time, an unexported field): the
// codec is then off and the YAML decoded.
//
// Decoding a pem.yaml starts from engine.DefaultConfig, so a cached value
// carries the defaults of the pem that wrote it: they are part of the
// cache files' fingerprint (configTypePrint), and a pem with other
// defaults never reads them.

// configTypePrint is the fingerprint of config cache files: the types and
// the defaults.
var configTypePrint = sync.OnceValue(func() string {
	def, _ := appendConfigBin(nil, engine.DefaultConfig())
	return fingerprint("config:", new(engine.Config), "defaults:"+string(def))
})

var configCodecOK = sync.OnceValue(func() bool { return reflectable(reflect.TypeOf(engine.Config{}), 0) })

// reflectable reports whether the reflection codec encodes every value of t.
func reflectable(t reflect.Type, depth int) bool {
	if depth > 8 {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool, reflect.String:
		return true
	case reflect.Slice:
		return reflectable(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() || !reflectable(t.Field(i).Type, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// appendConfigBin encodes c; ok=false when the codec is off.
func appendConfigBin(b []byte, c engine.Config) ([]byte, bool) {
	return encodeBin(b, configCodecOK(), func(w *binWriter) { w.reflected(reflect.ValueOf(c)) })
}

// decodeConfigBin decodes what appendConfigBin wrote; ok=false on anything
// else.
func decodeConfigBin(b []byte) (engine.Config, bool) {
	var c engine.Config
	if !decodeBin(b, configCodecOK(), func(r *binReader) { r.reflected(reflect.ValueOf(&c).Elem()) }) {
		return engine.Config{}, false
	}
	return c, true
}

func (w *binWriter) reflected(v reflect.Value) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		w.int(v.Int())
	case reflect.Float64:
		w.float(v.Float())
	case reflect.Bool:
		w.bool(v.Bool())
	case reflect.String:
		w.str(v.String())
	case reflect.Slice:
		w.count(v.Len(), v.IsNil())
		for i := 0; i < v.Len(); i++ {
			w.reflected(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			w.reflected(v.Field(i))
		}
	default:
		w.ok = false
	}
}

func (r *binReader) reflected(v reflect.Value) {
	if !r.ok {
		return
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		x := r.int64()
		if v.OverflowInt(x) {
			r.ok = false
			return
		}
		v.SetInt(x)
	case reflect.Float64:
		v.SetFloat(r.float())
	case reflect.Bool:
		v.SetBool(r.present())
	case reflect.String:
		v.SetString(r.str())
	case reflect.Slice:
		n, isNil := r.count()
		if isNil {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n && r.ok; i++ {
			r.reflected(s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField() && r.ok; i++ {
			r.reflected(v.Field(i))
		}
	default:
		r.ok = false
	}
}

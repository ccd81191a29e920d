package engine

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// TestRecallCloneIsDeep fills every field of a Recall (its unexported basis
// too) and checks the copy a kept answer hands out is equal and shares no
// slice, map or pointee with the kept one: a field added to Recall without a
// line in clone fails here.
func TestRecallCloneIsDeep(t *testing.T) {
	r := new(Recall)
	fillAll(reflect.ValueOf(r).Elem(), 0)
	c := r.clone()
	if !reflect.DeepEqual(c, r) {
		t.Fatal("the clone differs from the original")
	}
	if p := sharedAll(reflect.ValueOf(r).Elem(), reflect.ValueOf(c).Elem(), "Recall"); p != "" {
		t.Errorf("Recall.clone shares %s with the original: copy it in clone.go", p)
	}
}

// settable is v, writable even when it is an unexported field.
func settable(v reflect.Value) reflect.Value {
	if v.CanSet() || !v.CanAddr() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

func fillAll(v reflect.Value, depth int) {
	v = settable(v)
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			fillAll(v.Field(i), depth+1)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillAll(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillAll(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fillAll(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(p.Elem(), depth+1)
		v.Set(p)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	}
}

func sharedAll(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if p := sharedAll(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := 0; i < a.Len(); i++ {
			if p := sharedAll(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := sharedAll(a.MapIndex(k), b.MapIndex(k), path+"[k]"); p != "" {
				return p
			}
		}
	case reflect.Pointer:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
		if !a.IsNil() {
			return sharedAll(a.Elem(), b.Elem(), path+"*")
		}
	}
	return ""
}

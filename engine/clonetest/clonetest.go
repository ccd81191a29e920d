// Package clonetest is the reflection behind the tests that a Clone copies
// every field deeply (engine's Recall.clone, store's record Clones): Fill
// gives every field a value, Shared finds memory a copy still shares with
// its original. A field added to a type without a line in its Clone fails
// such a test. Tests only; it imports the standard library only.
package clonetest

import (
	"reflect"
	"time"
	"unsafe"
)

// Fill sets every field reachable from v (addressable) to a non-zero value:
// slices and maps get one element, pointers a new value, times a fixed
// instant. unexported: unexported fields too (written through unsafe, for a
// test in the type's own package); else they are left zero.
func Fill(v reflect.Value, unexported bool) { fill(v, unexported, 0) }

func fill(v reflect.Value, unexported bool, depth int) {
	if unexported {
		v = settable(v)
	}
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
			if unexported || v.Type().Field(i).IsExported() {
				fill(v.Field(i), unexported, depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), unexported, depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, unexported, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, unexported, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), unexported, depth+1)
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

// settable is v, writable even when it is an unexported field.
func settable(v reflect.Value) reflect.Value {
	if v.CanSet() || !v.CanAddr() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// Shared reports a path (from path, the name of a and b) where a and b
// share memory: a slice's array, a map or a pointee; "" when they share
// none. unexported: below unexported fields too; else those are not looked at.
func Shared(a, b reflect.Value, path string, unexported bool) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if unexported || a.Type().Field(i).IsExported() {
				if p := Shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name, unexported); p != "" {
					return p
				}
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := 0; i < a.Len(); i++ {
			if p := Shared(a.Index(i), b.Index(i), path+"[]", unexported); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := Shared(a.MapIndex(k), b.MapIndex(k), path+"[k]", unexported); p != "" {
				return p
			}
		}
	case reflect.Pointer:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
		if !a.IsNil() {
			return Shared(a.Elem(), b.Elem(), path+"*", unexported)
		}
	}
	return ""
}

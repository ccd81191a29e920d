package engine

import (
	"reflect"
	"testing"

	"github.com/pemdev/pem/engine/clonetest"
)

// TestRecallCloneIsDeep fills every field of a Recall (its unexported basis
// too) and checks the copy a kept answer hands out is equal and shares no
// slice, map or pointee with the kept one: a field added to Recall without a
// line in clone fails here.
func TestRecallCloneIsDeep(t *testing.T) {
	r := new(Recall)
	clonetest.Fill(reflect.ValueOf(r).Elem(), true)
	c := r.clone()
	if !reflect.DeepEqual(c, r) {
		t.Fatal("the clone differs from the original")
	}
	if p := clonetest.Shared(reflect.ValueOf(r).Elem(), reflect.ValueOf(c).Elem(), "Recall", true); p != "" {
		t.Errorf("Recall.clone shares %s with the original: copy it in clone.go", p)
	}
}

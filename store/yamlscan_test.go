package store_test

import (
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store"
)

// TestMayHoldScalar: whenever a facts document decodes to status verified,
// the pre-filter says it may; it says no only for documents that do not.
func TestMayHoldScalar(t *testing.T) {
	head := "format: 1\ndomain: a.example\nintent: x\nintent_key: x\n"
	cases := []struct {
		name, status string
		may          bool
	}{
		{"plain", "status: verified\n", true},
		{"double quoted", `status: "verified"` + "\n", true},
		{"single quoted", "status: 'verified'\n", true},
		{"two spaces", "status:   verified\n", true},
		{"flow style", "", true}, // the whole document in flow style, below
		{"hex escape", `status: "\x76erified"` + "\n", true},
		{"unicode escape", `status: "\u0076erified"` + "\n", true},
		{"escaped line break", "status: \"veri\\\n  fied\"\n", true},
		{"binary tag", "status: !!binary dmVyaWZpZWQ=\n", true},
		{"str tag", "status: !!str verified\n", true},
		{"block scalar", "status: >-\n  verified\n", true},
		{"candidate", "status: candidate\n", false},
		{"hypothesis with a hint", "status: hypothesis\ninteraction_hints:\n  - wait for the list\n", false},
	}
	for _, c := range cases {
		doc := head + c.status
		if c.name == "flow style" {
			doc = `{format: 1, domain: a.example, intent: x, intent_key: x, status: verified}` + "\n"
		}
		data := []byte(doc)
		var f engine.Facts
		if err := store.Unmarshal(data, &f, store.KindFacts); err != nil {
			t.Fatalf("%s: the document does not decode: %v\n%s", c.name, err, doc)
		}
		verified := f.Status == engine.Verified
		got := store.MayHoldScalar(data, string(engine.Verified))
		if verified && !got {
			t.Errorf("%s: decodes to status verified but the pre-filter says it cannot", c.name)
		}
		if got != c.may {
			t.Errorf("%s: MayHoldScalar = %v, want %v", c.name, got, c.may)
		}
		if verified != c.may { // every case that may hold it does: each spelling decodes to verified
			t.Errorf("%s: the case decodes to status %q", c.name, f.Status)
		}
	}
}

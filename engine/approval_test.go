package engine_test

import (
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestApprovalMatch(t *testing.T) {
	pol := engine.ApprovalPolicy{
		{Name: "payment", Actions: []string{"click", "press"}, Text: []string{"buy", "pay", "place order"}},
		{Name: "delete buttons", Selector: []string{"delete"}},
		{Name: "checkout pages", URL: []string{"*/checkout*"}},
		{Name: "admin typing", Actions: []string{"type"}, URL: []string{"https://admin.example.com/*"}},
		{Name: "send on mail", Text: []string{"send"}, URL: []string{"*://mail.example.com/*"}},
	}
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		step engine.ApprovalStep
		rule string // "" = no approval needed
		why  string // a part of Why
	}{
		{"buy button", engine.ApprovalStep{Action: "click", Selector: "#b1", Text: "Buy now", URL: "https://shop.test/item/1"}, "payment", `has "buy"`},
		{"case and spacing", engine.ApprovalStep{Action: "click", Selector: "#b", Text: "  PLACE\n  ORDER ", URL: "https://shop.test/cart"}, "payment", `has "place order"`},
		{"press counts", engine.ApprovalStep{Action: "press", Selector: "#pay", Text: "Pay", URL: "https://shop.test/"}, "payment", ""},
		{"word boundary: buyer", engine.ApprovalStep{Action: "click", Selector: "#x", Text: "Buyer protection", URL: "https://shop.test/"}, "", ""},
		{"word boundary: PayPal", engine.ApprovalStep{Action: "click", Selector: "#x", Text: "PayPal help", URL: "https://shop.test/"}, "", ""},
		{"reading is never gated by text", engine.ApprovalStep{Action: "get_text", Selector: "#b1", Text: "Buy now", URL: "https://shop.test/"}, "", ""},
		{"typing into a buy field is not a click", engine.ApprovalStep{Action: "type", Selector: "#q", Text: "Buy", URL: "https://shop.test/"}, "", ""},
		{"selector substring, any acting action", engine.ApprovalStep{Action: "type", Selector: "[data-action=Delete-repo]", URL: "https://git.test/"}, "delete buttons", `has "delete"`},
		{"selector rule ignores reads", engine.ApprovalStep{Action: "extract", Selector: "#delete-count", URL: "https://git.test/"}, "", ""},
		{"url glob on navigate target", engine.ApprovalStep{Action: "navigate", URL: "https://shop.test/checkout/2?x=1"}, "checkout pages", `matches "*/checkout*"`},
		{"url glob case-insensitive", engine.ApprovalStep{Action: "click", Selector: "#next", URL: "HTTPS://SHOP.TEST/CHECKOUT"}, "checkout pages", ""},
		{"url glob anchored", engine.ApprovalStep{Action: "click", Selector: "#next", URL: "https://shop.test/help"}, "", ""},
		{"AND across kinds: url fails", engine.ApprovalStep{Action: "type", Selector: "#name", URL: "https://www.example.com/x"}, "", ""},
		{"AND across kinds: both hold", engine.ApprovalStep{Action: "type", Selector: "#name", URL: "https://admin.example.com/users"}, "admin typing", "action type"},
		{"AND: text on another site", engine.ApprovalStep{Action: "click", Selector: "#s", Text: "Send", URL: "https://chat.example.com/"}, "", ""},
		{"AND: text on the site", engine.ApprovalStep{Action: "click", Selector: "#s", Text: "Send", URL: "https://mail.example.com/inbox"}, "send on mail", ""},
		{"no text known", engine.ApprovalStep{Action: "click", Selector: "#b1", URL: "https://shop.test/"}, "", ""},
		{"first rule wins", engine.ApprovalStep{Action: "click", Selector: "#delete", Text: "Pay and delete", URL: "https://shop.test/checkout"}, "payment", ""},
	}
	for _, tt := range tests {
		m, ok := pol.Match(tt.step)
		if ok != (tt.rule != "") || m.Rule != tt.rule {
			t.Errorf("%s: Match = %+v, %v; want rule %q", tt.name, m, ok, tt.rule)
			continue
		}
		if tt.why != "" && !strings.Contains(m.Why, tt.why) {
			t.Errorf("%s: why %q, want it to contain %q", tt.name, m.Why, tt.why)
		}
	}
	if _, ok := engine.ApprovalPolicy(nil).Match(engine.ApprovalStep{Action: "click", Text: "Buy"}); ok {
		t.Error("an empty policy asked for approval")
	}
}

func TestApprovalDefaultStarter(t *testing.T) {
	pol := engine.DefaultApproval()
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		text string
		want bool
	}{{"Buy now", true}, {"Delete repository", true}, {"Send message", true}, {"Submit", true}, {"Issues 12", false}, {"Search", false}} {
		_, ok := pol.Match(engine.ApprovalStep{Action: "click", Selector: "#x", Text: tt.text})
		if ok != tt.want {
			t.Errorf("starter rules on %q: %v, want %v", tt.text, ok, tt.want)
		}
	}
	if engine.DefaultConfig().Approval != nil {
		t.Error("DefaultConfig asks for approvals: a tree without an approval key must ask for nothing")
	}
}

func TestApprovalValidate(t *testing.T) {
	long := strings.Repeat("x", 301)
	tests := []struct {
		name string
		pol  engine.ApprovalPolicy
		want string // part of the error; "" = valid
	}{
		{"ok", engine.ApprovalPolicy{{Name: "a", Text: []string{"buy"}}}, ""},
		{"actions only", engine.ApprovalPolicy{{Name: "all typing", Actions: []string{"type"}}}, ""},
		{"no name", engine.ApprovalPolicy{{Text: []string{"buy"}}}, "has no name"},
		{"duplicate name", engine.ApprovalPolicy{{Name: "a", Text: []string{"buy"}}, {Name: "a", Text: []string{"pay"}}}, "used twice"},
		{"matches everything", engine.ApprovalPolicy{{Name: "a"}}, "would match everything"},
		{"unknown action", engine.ApprovalPolicy{{Name: "a", Actions: []string{"purchase"}}}, `action "purchase"`},
		{"empty pattern", engine.ApprovalPolicy{{Name: "a", Text: []string{" "}}}, "text pattern"},
		{"long pattern", engine.ApprovalPolicy{{Name: "a", URL: []string{long}}}, "url pattern"},
		{"multi-line name", engine.ApprovalPolicy{{Name: "a\nb", Text: []string{"x"}}}, "one line"},
		{"text with non-target action", engine.ApprovalPolicy{{Name: "a", Actions: []string{"navigate"}, Text: []string{"buy"}}}, "need a click"},
	}
	for _, tt := range tests {
		err := tt.pol.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	many := make(engine.ApprovalPolicy, engine.MaxApprovalRules+1)
	for i := range many {
		many[i] = engine.ApprovalRule{Name: strings.Repeat("r", i%70+1) + string(rune('a'+i%26)), Text: []string{"x"}}
	}
	if err := many.Validate(); err == nil || !strings.Contains(err.Error(), "cap") {
		t.Errorf("%d rules: %v", len(many), err)
	}
}

func TestApprovalRequiredWeighsNothing(t *testing.T) {
	c := engine.ApprovalRequired
	if !c.Valid() || !c.IsNoFault() || c.IsGate() {
		t.Fatalf("%s: valid %v no-fault %v gate %v", c, c.Valid(), c.IsNoFault(), c.IsGate())
	}
	if w := engine.DefaultPolicy().FailureWeight(c); w != 0 {
		t.Errorf("weight %v, want 0", w)
	}
	tr := &engine.Trace{Outcome: engine.Failure, FailureCategory: c, Error: "timeout 403"}
	if got := engine.Classify(tr); got != c {
		t.Errorf("Classify = %s, want the declared %s", got, c)
	}
}

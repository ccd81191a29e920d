package engine

import (
	"regexp"
	"testing"
)

// Every expression of engine compiles (they are compiled on first use, so a
// typo would otherwise only show when its rule first runs), and the methods
// behave as regexp's.
func TestLazyRegexpsCompile(t *testing.T) {
	n, err := AllLazyCompile()
	if err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Fatalf("only %d lazy expressions registered: the tables moved?", n)
	}
	l, re := LazyRE(`a(b+)c`), regexp.MustCompile(`a(b+)c`)
	s := "xabbc abc"
	if l.MatchString(s) != re.MatchString(s) || l.FindString(s) != re.FindString(s) || l.String() != re.String() ||
		len(l.FindStringSubmatch(s)) != 2 || l.ReplaceAllString(s, "x") != "xx x" || len(l.FindAllStringSubmatchIndex(s, -1)) != 2 ||
		len(l.FindAllString(s, -1)) != 2 || len(l.FindAllStringIndex(s, -1)) != 2 || l.FindStringIndex(s)[0] != 1 ||
		len(l.FindAllStringSubmatch(s, -1)) != 2 || l.FindStringSubmatchIndex(s)[2] != 2 ||
		l.ReplaceAllStringFunc(s, func(string) string { return "y" }) != "xy y" {
		t.Fatal("LazyRegexp's methods differ from regexp's")
	}
}

package engine_test

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestNormalizeURL(t *testing.T) {
	tests := []struct {
		name, in          string
		url, domain, path string
	}{
		{"lower-case host, www stripped", "https://WWW.Example.COM/Path", "https://example.com/Path", "example.com", "/Path"},
		{"path case kept", "https://example.com/AbC/dEf", "https://example.com/AbC/dEf", "example.com", "/AbC/dEf"},
		{"IDNA to punycode", "https://Bücher.example/x", "https://xn--bcher-kva.example/x", "xn--bcher-kva.example", "/x"},
		{"punycode input unchanged", "https://xn--bcher-kva.example/x", "https://xn--bcher-kva.example/x", "xn--bcher-kva.example", "/x"},
		{"IDN with www", "https://www.Bücher.example/", "https://xn--bcher-kva.example/", "xn--bcher-kva.example", "/"},
		{"default https port", "https://example.com:443/a", "https://example.com/a", "example.com", "/a"},
		{"default http port", "http://example.com:80/a", "http://example.com/a", "example.com", "/a"},
		{"other port kept, not in domain", "http://127.0.0.1:8080/a", "http://127.0.0.1:8080/a", "127.0.0.1", "/a"},
		{"443 on http is not default", "http://example.com:443/", "http://example.com:443/", "example.com", "/"},
		{"scheme upper-case", "HTTPS://example.com/", "https://example.com/", "example.com", "/"},
		{"no scheme reads as https", "example.com/a", "https://example.com/a", "example.com", "/a"},
		{"no scheme with port", "localhost:8080/a", "https://localhost:8080/a", "localhost", "/a"},
		{"no scheme, URL in the query", "example.com/login?next=https://example.com/x", "https://example.com/login?next=https%3A%2F%2Fexample.com%2Fx", "example.com", "/login"},
		{"fragment dropped", "https://example.com/a#section-2", "https://example.com/a", "example.com", "/a"},
		{"root stays /", "https://example.com", "https://example.com/", "example.com", "/"},
		{"trailing slash dropped", "https://example.com/a/b/", "https://example.com/a/b", "example.com", "/a/b"},
		{"double slashes collapsed", "https://example.com//a///b", "https://example.com/a/b", "example.com", "/a/b"},
		{"dot segments", "https://example.com/a/./b/../c", "https://example.com/a/c", "example.com", "/a/c"},
		{"dot-dot above root", "https://example.com/../../a", "https://example.com/a", "example.com", "/a"},
		{"utm params dropped", "https://example.com/a?utm_source=x&utm_Medium=y&UTM_campaign=z", "https://example.com/a", "example.com", "/a"},
		{"click ids dropped", "https://example.com/a?fbclid=1&gclid=2&msclkid=3&ref=home", "https://example.com/a", "example.com", "/a"},
		{"significant keys kept and sorted", "https://example.com/s?q=shoes&b=2&a=1&utm_source=x", "https://example.com/s?a=1&b=2&q=shoes", "example.com", "/s"},
		{"repeated values kept", "https://example.com/s?tag2=b&tag2=a", "https://example.com/s?tag2=b&tag2=a", "example.com", "/s"},
		{"volatile session, query and click ids dropped", "https://www.amazon.com/s?k=widgets&qid=1712345678&sr=8-1&crid=2X9&sprefix=wid&sid=abc&JSESSIONID=x&_ga=1.2", "https://amazon.com/s?k=widgets", "amazon.com", "/s"},
		{"tracking path segment dropped", "https://www.amazon.com/dp/B0012345/ref=sr_1_1?keywords=x", "https://amazon.com/dp/B0012345?keywords=x", "amazon.com", "/dp/B0012345"},
		{"%2F kept as-is", "https://example.com/files/a%2Fb/c", "https://example.com/files/a%2Fb/c", "example.com", "/files/a%2Fb/c"},
		{"space escaped", "https://example.com/a b", "https://example.com/a%20b", "example.com", "/a%20b"},
		{"userinfo dropped", "https://user:pw@example.com/a", "https://example.com/a", "example.com", "/a"},
		{"trailing dot in host", "https://example.com./a", "https://example.com/a", "example.com", "/a"},
		{"IPv4 host", "http://127.0.0.1/", "http://127.0.0.1/", "127.0.0.1", "/"},
		{"surrounding space", "  https://example.com/a  ", "https://example.com/a", "example.com", "/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := engine.NormalizeURL(tt.in)
			if err != nil {
				t.Fatalf("NormalizeURL(%q): %v", tt.in, err)
			}
			if n.URL != tt.url || n.Domain != tt.domain || n.Path != tt.path {
				t.Errorf("NormalizeURL(%q) = {URL %q, Domain %q, Path %q}, want {%q, %q, %q}", tt.in, n.URL, n.Domain, n.Path, tt.url, tt.domain, tt.path)
			}
			again, err := engine.NormalizeURL(n.URL)
			if err != nil || again.URL != n.URL {
				t.Errorf("not idempotent: NormalizeURL(%q) = %q, %v", n.URL, again.URL, err)
			}
		})
	}
}

func TestNormalizeURLQuery(t *testing.T) {
	n, err := engine.NormalizeURL("https://example.com/s?k=shoes&utm_source=x&gclid=1&page=2")
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"k": {"shoes"}, "page": {"2"}}
	if fmt.Sprint(n.Query) != fmt.Sprint(want) {
		t.Errorf("Query = %v, want %v", n.Query, want)
	}
}

func TestNormalizeURLRefused(t *testing.T) {
	for _, in := range []string{
		"",
		"   ",
		"https://",
		"https:///path",
		"http://:80/",
		"ftp://example.com/file",
		"file:///etc/passwd",
		"mailto:someone@example.com",
		"javascript:alert(1)",
		"data:text/html,hello",
		"ws://example.com/socket",
		"http://[::1]/",
		"https://exa mple.com/",
		"https://" + strings.Repeat("a", 9000) + ".com/",
		"https://a..b/",
	} {
		n, err := engine.NormalizeURL(in)
		if !errors.Is(err, engine.ErrBadURL) {
			t.Errorf("NormalizeURL(%q) = %+v, %v; want ErrBadURL", in, n, err)
		}
	}
}

func TestNormalizeURLErrorSaysWhat(t *testing.T) {
	_, err := engine.NormalizeURL("ftp://example.com/")
	if err == nil || !strings.Contains(err.Error(), "ftp") || !strings.Contains(err.Error(), "http") {
		t.Errorf("error %v should name the scheme and what is accepted", err)
	}
	_, err = engine.NormalizeURL("https:///x")
	if err == nil || !strings.Contains(err.Error(), "host") {
		t.Errorf("error %v should say the host is missing", err)
	}
}

func TestNormalizeDomain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Example.COM", "example.com"},
		{"www.example.com", "example.com"},
		{"www.www.example.com", "example.com"},
		{"Bücher.example", "xn--bcher-kva.example"},
		{"ÉCOLE.fr", "xn--cole-9oa.fr"},
		{"example.com.", "example.com"},
		{"10.0.0.1", "10.0.0.1"},
		{"::ffff:10.0.0.1", "10.0.0.1"}, // an IPv4-mapped address is its IPv4 address
		{"wwwexample.com", "wwwexample.com"},
	}
	for _, tt := range tests {
		got, err := engine.NormalizeDomain(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", ".", "..", "a/b", `a\b`, "::1", "fe80::1%eth0", "2001:db8::68", "a..b"} {
		if got, err := engine.NormalizeDomain(in); err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want an error", in, got)
		}
	}
}

func pattern(t *testing.T, raw string) string {
	t.Helper()
	n, err := engine.NormalizeURL(raw)
	if err != nil {
		t.Fatalf("NormalizeURL(%q): %v", raw, err)
	}
	return engine.Pattern(n)
}

func TestPattern(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://www.amazon.com/dp/B0012345", "/dp/*"},
		{"https://www.amazon.com/dp/B0012345/ref=sr_1_1", "/dp/*"},
		{"https://github.com/golang/go/issues/4819", "/golang/go/issues/*"},
		{"https://example.com/s?k=shoes", "/s?k=*"},
		{"https://example.com/s?k=shoes&utm_source=mail", "/s?k=*"},
		{"https://www.amazon.com/s?k=widgets&qid=1712345678&sr=8-1", "/s?k=*"}, // one pattern per page type
		{"https://example.com/s?q=x&a=1", "/s?a=*&q=*"},
		{"https://example.com/s?k=", "/s?k=*"},
		{"https://example.com", "/"},
		{"https://example.com/", "/"},
		{"https://example.com/?utm_source=x", "/"},
		{"https://example.com/u/123e4567-e89b-12d3-a456-426614174000", "/u/*"},
		{"https://example.com/commit/3f2a9c1", "/commit/*"},
		{"https://example.com/commit/9fceb02d0ae598e95dc970b74767f19372d61af8", "/commit/*"},
		{"https://example.com/api/v2/users", "/api/v2/users"},
		{"https://example.com/h1/page", "/h1/page"},
		{"https://example.com/html5", "/html5"},
		{"https://example.com/item-48213", "/*"},
		{"https://example.com/2024/05/post", "/*/*/post"},
		{"https://example.com/deadbeef", "/deadbeef"}, // hex without a digit is a word
		{"https://example.com/files/a%2Fb", "/files/a%2Fb"},
		{"https://example.com/Issues/New", "/Issues/New"},
	}
	for _, tt := range tests {
		if got := pattern(t, tt.in); got != tt.want {
			t.Errorf("Pattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func mustNorm(t *testing.T, raw string) engine.NormalizedURL {
	t.Helper()
	n, err := engine.NormalizeURL(raw)
	if err != nil {
		t.Fatalf("NormalizeURL(%q): %v", raw, err)
	}
	return n
}

func TestMatchPattern(t *testing.T) {
	tests := []struct {
		pattern, url string
		ok           bool
		spec         engine.Specificity
	}{
		{"/dp/*", "https://amazon.com/dp/B0099", true, engine.Specificity{Literals: 1, Length: 2}},
		{"/dp/*", "https://amazon.com/dp/B0099/reviews", false, engine.Specificity{}},
		{"/dp/*", "https://amazon.com/dp", false, engine.Specificity{}},
		{"/", "https://example.com/", true, engine.Specificity{}},
		{"/", "https://example.com/a", false, engine.Specificity{}},
		{"/a/**", "https://example.com/a/b/c", true, engine.Specificity{Literals: 1, Length: 1}},
		{"/s?k=*", "https://example.com/s?k=boots", true, engine.Specificity{Literals: 1, QueryKeys: 1, Length: 1}},
		{"/s?k=*", "https://example.com/s?k=boots&page=2", true, engine.Specificity{Literals: 1, QueryKeys: 1, Length: 1}},
		{"/s?k=*", "https://example.com/s", false, engine.Specificity{}},
		{"/s?k=boots", "https://example.com/s?k=boots", true, engine.Specificity{Literals: 2, QueryKeys: 1, Length: 1}},
		{"/s?k=boots", "https://example.com/s?k=shoes", false, engine.Specificity{}},
		{"/files/a%2Fb", "https://example.com/files/a%2Fb", true, engine.Specificity{Literals: 2, Length: 2}},
		{"/files/a/b", "https://example.com/files/a%2Fb", false, engine.Specificity{}},
		{"/Issues", "https://example.com/issues", false, engine.Specificity{}},
	}
	for _, tt := range tests {
		sp, ok := engine.MatchPattern(tt.pattern, mustNorm(t, tt.url))
		if ok != tt.ok || sp != tt.spec {
			t.Errorf("MatchPattern(%q, %q) = %+v, %v; want %+v, %v", tt.pattern, tt.url, sp, ok, tt.spec, tt.ok)
		}
	}
}

// TestMatchPatternRanking: the most specific pattern wins — literal segments
// first, then pinned query keys, then length.
func TestMatchPatternRanking(t *testing.T) {
	tests := []struct {
		url      string
		patterns []string // from most to least specific
	}{
		{"https://github.com/golang/go/issues/new", []string{"/golang/go/issues/new", "/golang/go/issues/*", "/*/*/issues/*", "/*/*/*/*"}},
		{"https://example.com/s?k=shoes&page=2", []string{"/s?k=shoes", "/s?k=*&page=*", "/s?k=*", "/s", "/*"}},
		{"https://example.com/a/b", []string{"/a/b", "/a/*", "/a/**", "/*/*"}},
	}
	for _, tt := range tests {
		n := mustNorm(t, tt.url)
		type ranked struct {
			p  string
			sp engine.Specificity
		}
		var rs []ranked
		for _, p := range tt.patterns {
			sp, ok := engine.MatchPattern(p, n)
			if !ok {
				t.Fatalf("MatchPattern(%q, %q) did not match", p, tt.url)
			}
			rs = append(rs, ranked{p, sp})
		}
		sort.SliceStable(rs, func(i, j int) bool { return rs[j].sp.Less(rs[i].sp) })
		for i := range rs {
			if rs[i].p != tt.patterns[i] {
				got := make([]string, len(rs))
				for j := range rs {
					got[j] = fmt.Sprintf("%s%+v", rs[j].p, rs[j].sp)
				}
				t.Errorf("%s: ranking %v, want %v", tt.url, got, tt.patterns)
				break
			}
		}
		for i := 0; i+1 < len(rs); i++ {
			if !rs[i+1].sp.Less(rs[i].sp) {
				t.Errorf("%s: %q does not rank strictly above %q", tt.url, rs[i].p, rs[i+1].p)
			}
		}
	}
}

// TestPatternMatchesItsURL: the pattern of a URL always matches that URL.
func TestPatternMatchesItsURL(t *testing.T) {
	for _, raw := range []string{
		"https://example.com/", "https://example.com/dp/B0012345", "https://example.com/s?k=a&b=c",
		"https://example.com/a%2Fb/4819?x=1", "https://example.com/u/123e4567-e89b-12d3-a456-426614174000",
		"https://example.com/q?a+b=c", "https://example.com/q?%26=1",
	} {
		n := mustNorm(t, raw)
		if _, ok := engine.MatchPattern(engine.Pattern(n), n); !ok {
			t.Errorf("Pattern(%q) = %q does not match its own URL", raw, engine.Pattern(n))
		}
	}
}

func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{
		"https://www.example.com/a?b=1#c", "https://Bücher.example/x", "example.com/dp/B0012345/ref=sr_1_1",
		"http://127.0.0.1:8080/s?k=shoes&utm_source=x", "https://a.b/%2F/../x?y=%20", "https://www.www.a.b/",
		"mailto:a@b.c", "https://[::1]/", "https://a.b/a;b?c;d=1", "https://A.B:443//x/./y/..",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := engine.NormalizeURL(raw)
		if err != nil {
			if !errors.Is(err, engine.ErrBadURL) {
				t.Fatalf("NormalizeURL(%.200q) error %.200v is not ErrBadURL", raw, err)
			}
			return
		}
		again, err := engine.NormalizeURL(n.URL)
		if err != nil {
			t.Fatalf("NormalizeURL(%.200q) = %.200q, which does not normalize again: %.200v", raw, n.URL, err)
		}
		if again.URL != n.URL || again.Domain != n.Domain || again.Path != n.Path {
			t.Fatalf("not idempotent: %.200q → %.200q → %.200q", raw, n.URL, again.URL)
		}
		if engine.Pattern(again) != engine.Pattern(n) {
			t.Fatalf("pattern changed on renormalizing %q: %q vs %q", raw, engine.Pattern(n), engine.Pattern(again))
		}
		d := n.Domain
		if d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\\:\x00 ") || strings.HasPrefix(d, "www.") || d != strings.ToLower(d) {
			t.Fatalf("NormalizeURL(%q): domain %q is not one safe lower-case path segment", raw, d)
		}
		if !strings.HasPrefix(n.Path, "/") || (n.Path != "/" && strings.HasSuffix(n.Path, "/")) || strings.Contains(n.Path, "//") {
			t.Fatalf("NormalizeURL(%q): path %q is not canonical", raw, n.Path)
		}
		for _, seg := range strings.Split(n.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("NormalizeURL(%q): path %q keeps a dot segment", raw, n.Path)
			}
		}
		if strings.Contains(n.URL, "#") {
			t.Fatalf("NormalizeURL(%q) = %q keeps a fragment", raw, n.URL)
		}
		for k := range n.Query {
			if strings.HasPrefix(strings.ToLower(k), "utm_") || k == "fbclid" || k == "gclid" {
				t.Fatalf("NormalizeURL(%q) kept tracking key %q", raw, k)
			}
		}
		if _, ok := engine.MatchPattern(engine.Pattern(n), n); !ok {
			t.Fatalf("Pattern(%q) = %q does not match its own URL", n.URL, engine.Pattern(n))
		}
	})
}

package engine_test

import (
	"errors"
	"testing"

	"github.com/pemdev/pem/engine"
)

func TestNormalizeURLRefusesHostileHostsAndPorts(t *testing.T) {
	for _, raw := range []string{
		"https://example.com:99999/", "https://example.com:0/", "https://example.com:65536/x",
		"http://0x7f.1/", "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://017.0.0.1/",
		"http://example.0x10/", "http://1.2.3/",
	} {
		if n, err := engine.NormalizeURL(raw); !errors.Is(err, engine.ErrBadURL) {
			t.Errorf("NormalizeURL(%q) = %q, %v; want ErrBadURL", raw, n.URL, err)
		}
	}
	for raw, want := range map[string]string{
		"https://example.com:65535/a":        "https://example.com:65535/a",
		"https://example.com:0080/a":         "https://example.com:80/a",
		"http://example.com:0080/a":          "http://example.com/a",
		"http://127.0.0.1:8080/":             "http://127.0.0.1:8080/",
		"https://exa\r\nmple.com/a\nb?q=1\r": "https://example.com/ab?q=1",
		"https://example.com/\tx":            "https://example.com/x",
		"https://v2.example.com/x":           "https://v2.example.com/x",
	} {
		n, err := engine.NormalizeURL(raw)
		if err != nil || n.URL != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", raw, n.URL, err, want)
		}
	}
	// Step URLs: cleaned of control characters too.
	if got := engine.CleanURL("https://example.com/a\r\nSet-Cookie: x=1"); got == "" || containsCRLF(got) {
		t.Errorf("CleanURL kept CR/LF: %q", got)
	}
	// ...and stay the URL the run visited: replay navigates to it.
	for raw, want := range map[string]string{
		"https://WWW.Example.com/a?utm_source=x#/route": "https://www.example.com/a?utm_source=x#/route",
		"https://user:pw@example.com/x":                 "https://example.com/x",
		"about:blank":                                   "about:blank",
	} {
		if got := engine.CleanURL(raw); got != want {
			t.Errorf("CleanURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func containsCRLF(s string) bool {
	for _, r := range s {
		if r == '\r' || r == '\n' {
			return true
		}
	}
	return false
}

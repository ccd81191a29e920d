package rod

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// legacyListJS is page.js with each uniqueness check made as before the
// candidate index: one document.querySelectorAll of the whole document per
// selector tried. It is the reference the listings are compared with and the
// baseline BenchmarkListing measures.
func legacyListJS(tb testing.TB) string {
	tb.Helper()
	js := pageJS
	for _, r := range [][2]string{
		{`const uniqueId = (el) => onlyAmong("#" + CSS.escape(el.id), el, bucket("id", el.id.toLowerCase()));`,
			`const uniqueId = (el) => legacyUnique("#" + CSS.escape(el.id), el);`},
		{`const uniqueAttr = (sel, el, tag, attr, v) => onlyAmong(sel, el, bucket(attr, tag + "\u0000" + v));`,
			`const uniqueAttr = (sel, el) => legacyUnique(sel, el);`},
		{`const uniquePath = (parts, el) => {`,
			`const uniquePath = (parts, el) => legacyUnique(parts.join(" > "), el);
  const unusedPath = (parts, el) => {`},
		{`const index = new Map();`, `const index = new Map();
  const legacyUnique = (sel, el) => {
    try {
      const m = document.querySelectorAll(sel);
      return m.length === 1 && m[0] === el;
    } catch (e) {
      return false;
    }
  };`},
	} {
		if !strings.Contains(js, r[0]) {
			tb.Fatalf("page.js no longer has %q: update legacyListJS", r[0])
		}
		js = strings.Replace(js, r[0], r[1], 1)
	}
	return js
}

// trickyBody has what selector uniqueness turns on: repeated hrefs, names
// and titles, repeated ids, ids differing only in case (equal in quirks
// mode), quotes and backslashes in values, an SVG link, paths anchored at an
// id and paths up to body.
const trickyBody = `<nav><a href="/dup">Dup 1</a> <a href="/dup">Dup 2</a> <a href="/u">Unique</a></nav>
<div id="Sec"><p id="sec">case twin</p><ul><li><a href="/dup">in list</a></li><li><a href="/dup">in list 2</a></li></ul>
<dl><dt id="term">Term</dt><dd>Value of term</dd></dl></div>
<div id="twin"><button>One</button></div><div id="twin"><button>Two</button></div>
<svg width="50" height="20"><a href="/dup"><text x="0" y="15">svg link</text></a></svg>
<form><input name="q"> <input name="q"> <input title="T"> <input title="T" name="z"> <textarea placeholder="P"></textarea></form>
<div><div><span role="button">deep</span></div><div><span role="button">deep 2</span><p>Count: <b>12</b></p></div></div>
<a href='/quote"d'>quote</a> <a href="/back\slash">bs</a> <a href="/back\slash">bs 2</a>
<section id="1num"><h2>Heading</h2><p>digit id</p><pre>code</pre><table><tr><th>Key</th><td>val</td></tr></table></section>`

// TestListingMatchesBaseline: the element, block and label listings (and
// so their selectors) are exactly what the one-scan-per-selector algorithm
// gave, on tricky markup in standards and quirks mode and on a real
// documentation page.
func TestListingMatchesBaseline(t *testing.T) {
	const docs = "/usr/share/doc/python-jinja2-doc/html"
	if _, err := os.Stat(filepath.Join(docs, "templates.html")); err != nil {
		t.Fatalf("install the Jinja documentation: apt-get install python-jinja2-doc (%v)", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/docs/", http.StripPrefix("/docs/", http.FileServer(http.Dir(docs))))
	mux.HandleFunc("/standards", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, layout, "Tricky", trickyBody)
	})
	mux.HandleFunc("/quirks", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><head><title>Quirks</title></head><body>%s</body></html>", trickyBody)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	ctx := context.Background()
	p := openAt(t, "", 30*time.Second)
	legacy := legacyListJS(t)
	for _, path := range []string{"/standards", "/quirks", "/docs/templates.html"} {
		if err := p.Navigate(ctx, hs.URL+path); err != nil {
			t.Fatal(err)
		}
		mode, _ := p.Evaluate(ctx, `document.compatMode`)
		for _, op := range []string{"elements", "blocks", "labelled"} {
			want, err := p.evalJS(ctx, 0, legacy, op, "", 3000)
			if err != nil {
				t.Fatalf("%s %s baseline: %v", path, op, err)
			}
			got, err := p.evalJS(ctx, 0, pageJS, op, "", 3000)
			if err != nil {
				t.Fatalf("%s %s: %v", path, op, err)
			}
			w, g := want.Value.JSON("", ""), got.Value.JSON("", "")
			if len(w) < 100 {
				t.Errorf("%s %s: the baseline listed almost nothing (%s): the page did not load?", path, op, w)
			}
			if g != w {
				t.Errorf("%s (%s) %s differs from the baseline:\n got %.2000s\nwant %.2000s", path, mode, op, g, w)
			}
		}
		if path == "/quirks" && mode != `"BackCompat"` {
			t.Errorf("/quirks is in %s mode, want BackCompat", mode)
		}
	}
	// The selectors of the tricky page resolve back to their elements.
	if err := p.Navigate(ctx, hs.URL+"/standards"); err != nil {
		t.Fatal(err)
	}
	els, err := p.Elements(ctx, "", 0)
	if err != nil || len(els) < 15 {
		t.Fatalf("Elements = %d, %v", len(els), err)
	}
	for _, e := range els {
		n, err := p.Evaluate(ctx, fmt.Sprintf("document.querySelectorAll(%q).length", e.Selector))
		if err != nil || n != "1" {
			t.Errorf("selector %s (%q) matches %s elements (%v)", e.Selector, e.Text, n, err)
		}
	}
}

// BenchmarkListing lists the elements and the blocks of Flask's API page
// (925 KB, 1,127 interactive elements), the baseline (legacyListJS) and
// the current page.js alternately, and reports each one's mean in ms and
// the ratio current/baseline.
func BenchmarkListing(b *testing.B) {
	const docs = "/usr/share/doc/python-flask-doc/html"
	if _, err := os.Stat(filepath.Join(docs, "api.html")); err != nil {
		b.Fatalf("install the Flask documentation: apt-get install python-flask-doc (%v)", err)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(docs)))
	defer hs.Close()
	ctx := context.Background()
	legacy := legacyListJS(b)
	for _, op := range []string{"elements", "blocks"} {
		b.Run(op, func(b *testing.B) {
			p := openAt(b, hs.URL+"/api.html", 2*time.Minute)
			var old, cur time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := p.evalJS(ctx, 0, legacy, op, "", 3000); err != nil {
					b.Fatal("baseline:", err)
				}
				t1 := time.Now()
				if _, err := p.evalJS(ctx, 0, pageJS, op, "", 3000); err != nil {
					b.Fatal("current:", err)
				}
				old, cur = old+t1.Sub(t0), cur+time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(old.Milliseconds())/n, "baseline-ms")
			b.ReportMetric(float64(cur.Milliseconds())/n, "current-ms")
			b.ReportMetric(float64(cur)/float64(old), "current/baseline")
		})
	}
}

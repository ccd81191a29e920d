package rod

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/pemdev/pem/agent"
)

// The adapter as it was before the settle and Exists rework, kept here as
// the baseline that BenchmarkVsBaseline measures in the same run: rod's
// WaitLoad after a navigation, a fresh 100 ms quiet window opened on every
// settle, and Exists polling rod's Element for 500 ms.

const legacySettleJS = `(quiet) => new Promise((resolve) => {
	let t;
	const done = () => { mo.disconnect(); clearTimeout(t); clearTimeout(cap); resolve(true) };
	const mo = new MutationObserver(() => { clearTimeout(t); t = setTimeout(done, quiet) });
	const cap = setTimeout(done, 1500);
	t = setTimeout(done, quiet);
	mo.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})`

func (p *Page) legacySettle(ctx context.Context, seq0 int, navigating bool) {
	if navigating {
		p.waitLoaded(ctx, seq0, p.timeout)
	}
	qctx, cancel := context.WithTimeout(ctx, settleMax)
	defer cancel()
	_, _ = p.pg.Context(qctx).Eval(legacySettleJS, 100) // the quiet window then
	if seq, _, _ := p.state(); seq > seq0 && !navigating {
		p.waitLoaded(ctx, seq0, settleMax)
	}
}

func (p *Page) legacyNavigate(ctx context.Context, url string) error {
	seq0, _, _ := p.state()
	pg, _, cancel := p.with(ctx, 0)
	defer cancel()
	if err := pg.Navigate(url); err != nil {
		return err
	}
	if err := pg.WaitLoad(); err != nil {
		return err
	}
	p.legacySettle(ctx, seq0, true)
	return nil
}

func (p *Page) legacyClick(ctx context.Context, selector string) error {
	el, cancel, err := p.lookup(ctx, "click", selector)
	defer cancel()
	if err != nil {
		return err
	}
	pt, err := p.reachable(ctx, el)
	if err != nil {
		return err
	}
	p.armNav(ctx)
	seq0, _, _ := p.state()
	if err := p.pg.Mouse.MoveTo(*pt); err != nil {
		return err
	}
	if err := p.pg.Mouse.Click(proto.InputMouseButtonLeft, 1); err != nil {
		return err
	}
	p.legacySettle(ctx, seq0, p.legacyNavigating(ctx, seq0))
	return nil
}

// legacyNavigating is how a click told whether it navigated: a load
// started, or the page's note of a navigate event.
func (p *Page) legacyNavigating(ctx context.Context, seq0 int) bool {
	if seq, _, _ := p.state(); seq > seq0 {
		return true
	}
	v, err := p.evalJS(ctx, 0, `() => window.__pemNav`)
	return err != nil || v.Value.Nil() || v.Value.Int() != 0
}

func (p *Page) legacyExists(ctx context.Context, selector string) (bool, error) {
	pg, _, cancel := p.with(ctx, 500*time.Millisecond)
	defer cancel()
	el, err := pg.Element(selector)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return false, fmt.Errorf("exists %q: %w", selector, agent.ErrNoElement)
		}
		return false, err
	}
	return el.Visible()
}

// BenchmarkVsBaseline alternates the baseline (legacy*) and the current
// adapter iteration by iteration, so both see the same machine load, and
// reports each one's mean in ms and the ratio current/baseline.
func BenchmarkVsBaseline(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name     string
		setup    func(p *Page) error
		old, cur func(p *Page) error
	}{
		{"navigate", nil,
			func(p *Page) error { return p.legacyNavigate(ctx, srv.URL+"/repo") },
			func(p *Page) error { return p.Navigate(ctx, srv.URL+"/repo") }},
		{"click-link", nil,
			func(p *Page) error {
				if err := p.legacyNavigate(ctx, srv.URL+"/"); err != nil {
					return err
				}
				return p.legacyClick(ctx, "#repo-link")
			},
			func(p *Page) error {
				if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
					return err
				}
				return p.Click(ctx, "#repo-link")
			}},
		{"click-in-page", func(p *Page) error { return p.Navigate(ctx, srv.URL+"/") },
			func(p *Page) error { return p.legacyClick(ctx, "#more") },
			func(p *Page) error { return p.Click(ctx, "#more") }},
		{"click-hash", func(p *Page) error {
			if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
				return err
			}
			_, err := p.Evaluate(ctx, `document.body.insertAdjacentHTML("afterbegin", '<a id="ha" href="#a">a</a> <a id="hb" href="#b">b</a>')`)
			return err
		},
			func(p *Page) error { return p.legacyClick(ctx, "#ha") },
			func(p *Page) error { return p.Click(ctx, "#hb") }},
		{"exists-absent", func(p *Page) error { return p.Navigate(ctx, srv.URL+"/repo") },
			func(p *Page) error { _, err := p.legacyExists(ctx, "#absent"); return wantNoElement(err) },
			func(p *Page) error { _, err := p.Exists(ctx, "#absent"); return wantNoElement(err) }},
		{"exists-present", func(p *Page) error { return p.Navigate(ctx, srv.URL+"/repo") },
			func(p *Page) error { _, err := p.legacyExists(ctx, "#branch"); return err },
			func(p *Page) error { _, err := p.Exists(ctx, "#branch"); return err }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := openAt(b, "", 0)
			if c.setup != nil {
				if err := c.setup(p); err != nil {
					b.Fatal(err)
				}
			}
			var old, cur time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := c.old(p); err != nil {
					b.Fatal("baseline:", err)
				}
				t1 := time.Now()
				if err := c.cur(p); err != nil {
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

// BenchmarkSettleAtLoad alternates, iteration by iteration, a navigation
// and a link click settled as every page is (the load, then 50 ms without
// DOM changes) with the same under agent.SettleAtLoad (the load only, as a
// P1 replay takes the page before a link click), and reports each one's
// mean in ms and the ratio. A click is timed alone, not the navigation to
// its page.
func BenchmarkSettleAtLoad(b *testing.B) {
	bg := context.Background()
	at := agent.SettleAtLoad(bg)
	timed := func(f func() error) (time.Duration, error) {
		t0 := time.Now()
		err := f()
		return time.Since(t0), err
	}
	for _, c := range []struct {
		name string
		do   func(ctx context.Context, p *Page) (time.Duration, error)
	}{
		{"navigate", func(ctx context.Context, p *Page) (time.Duration, error) {
			return timed(func() error { return p.Navigate(ctx, srv.URL+"/repo") })
		}},
		{"click-link", func(ctx context.Context, p *Page) (time.Duration, error) {
			if err := p.Navigate(bg, srv.URL+"/"); err != nil {
				return 0, err
			}
			return timed(func() error { return p.Click(ctx, "#repo-link") })
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := openAt(b, "", 0)
			var full, load time.Duration
			for b.Loop() {
				d, err := c.do(bg, p)
				if err != nil {
					b.Fatal(err)
				}
				full += d
				if d, err = c.do(at, p); err != nil {
					b.Fatal(err)
				}
				load += d
			}
			n := float64(b.N)
			b.ReportMetric(float64(full.Microseconds())/1000/n, "full-ms")
			b.ReportMetric(float64(load.Microseconds())/1000/n, "at-load-ms")
			b.ReportMetric(float64(load)/float64(full), "at-load/full")
		})
	}
}

func wantNoElement(err error) error {
	if !errors.Is(err, agent.ErrNoElement) {
		return fmt.Errorf("want ErrNoElement, got %v", err)
	}
	return nil
}

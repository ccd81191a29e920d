package rod

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gorod "github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/input"
	"github.com/go-rod/rod/lib/proto"

	"github.com/pemdev/pem/agent"
)

//go:embed page.js
var pageJSFile string

// pageJS is page.js without its leading comment lines.
var pageJS = func() string {
	lines := strings.Split(pageJSFile, "\n")
	for len(lines) > 0 && strings.HasPrefix(strings.TrimSpace(lines[0]), "//") {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}()

// Page is one tab; it implements agent.Page.
type Page struct {
	pg      *gorod.Page // bound to the page's lifetime context
	timeout time.Duration
	stop    context.CancelFunc
	input   *sync.Mutex // the browser's: one tab at a time is brought to the front and sent input

	mu      sync.Mutex
	navSeq  int                     // main-frame loads started (Page.frameStartedLoading)
	loading bool                    // main frame is loading
	url     string                  // main frame's URL, from events
	loaders []proto.NetworkLoaderID // the main frame's last committed loader ids (documents), newest last
	nav     navCount                // main-frame navigation events counted
	changed chan struct{}
}

// navCount counts the main frame's navigation events, so that an action can
// tell what happened after it (see mark and land).
type navCount struct {
	requested int    // renderer-initiated navigations in this tab (Page.frameRequestedNavigation)
	started   int    // navigations started (Page.frameStartedNavigating), same-document ones included
	crossDoc  bool   // the last one started replaces the document
	commits   int    // documents committed (Page.frameNavigated)
	within    int    // same-document navigations done (Page.navigatedWithinDocument)
	dest      string // the destination of the last navigation requested or started
}

// frameStartedNavigating is Page.frameStartedNavigating (Chromium 131+),
// which go-rod's protocol package does not have: a navigation of the frame
// started, browser- or renderer-initiated, with its loader id and kind.
type frameStartedNavigating struct {
	FrameID        proto.PageFrameID     `json:"frameId"`
	URL            string                `json:"url"`
	LoaderID       proto.NetworkLoaderID `json:"loaderId"`
	NavigationType string                `json:"navigationType"`
}

// ProtoEvent is the event's protocol name.
func (frameStartedNavigating) ProtoEvent() string { return "Page.frameStartedNavigating" }

var _ agent.Page = (*Page)(nil)

func newPage(pg *gorod.Page, timeout time.Duration, stop context.CancelFunc, input *sync.Mutex) *Page {
	p := &Page{pg: pg, timeout: timeout, stop: stop, input: input, changed: make(chan struct{})}
	main := pg.FrameID
	// Track the main frame's loading and navigations so that an action that
	// navigates (a link, a form submit) is followed by a wait for the new
	// document. One loop over the tab's raw messages keeps the events in
	// Chromium's order (go-rod's EachEvent cannot decode an event its
	// protocol package lacks: frameStartedNavigating).
	restore := pg.EnableDomain(&proto.PageEnable{})
	msgs := pg.Browser().Context(pg.GetContext()).Event()
	go func() {
		defer restore()
		for msg := range msgs {
			if msg.SessionID != pg.SessionID {
				continue
			}
			p.event(main, msg)
		}
	}()
	return p
}

// event applies one of the tab's protocol events to the page's state.
func (p *Page) event(main proto.PageFrameID, msg *gorod.Message) {
	switch msg.Method {
	case "Page.frameStartedLoading":
		var e proto.PageFrameStartedLoading
		if msg.Load(&e) && e.FrameID == main {
			p.setLoading(true)
		}
	case "Page.frameStoppedLoading":
		var e proto.PageFrameStoppedLoading
		if msg.Load(&e) && e.FrameID == main {
			p.setLoading(false)
		}
	case "Page.frameNavigated":
		var e proto.PageFrameNavigated
		if msg.Load(&e) && e.Frame.ParentID == "" && e.Frame.ID == main {
			p.setCommitted(e.Frame.LoaderID, e.Frame.URL+e.Frame.URLFragment)
		}
	case "Page.navigatedWithinDocument":
		var e proto.PageNavigatedWithinDocument
		if msg.Load(&e) && e.FrameID == main {
			p.setWithin(e.URL)
		}
	case "Page.frameRequestedNavigation":
		var e proto.PageFrameRequestedNavigation
		if msg.Load(&e) && e.FrameID == main && e.Disposition == proto.PageClientNavigationDispositionCurrentTab {
			p.count(func(n *navCount) { n.requested++; n.dest = e.URL })
		}
	case "Page.frameStartedNavigating":
		var e frameStartedNavigating
		if msg.Load(&e) && e.FrameID == main {
			same := e.NavigationType == "sameDocument" || e.NavigationType == "historySameDocument"
			p.count(func(n *navCount) { n.started++; n.crossDoc = !same; n.dest = e.URL })
		}
	}
}

// setWithin records a same-document navigation of the main frame to u.
func (p *Page) setWithin(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.url = u
	p.nav.within++
	p.notify()
}

// count applies f to the navigation counters and wakes the waiters.
func (p *Page) count(f func(*navCount)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.nav)
	p.notify()
}

// maxLoaders is how many committed documents the page remembers: a
// navigation's own commit may be followed by a script's before Navigate looks.
const maxLoaders = 8

// setCommitted records that the main frame committed a new document (loader
// id) at u.
func (p *Page) setCommitted(loader proto.NetworkLoaderID, u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.url = u
	p.nav.commits++
	if loader != "" {
		p.loaders = append(p.loaders, loader)
		if len(p.loaders) > maxLoaders {
			p.loaders = p.loaders[len(p.loaders)-maxLoaders:]
		}
	}
	p.notify()
}

// committed reports whether the main frame has committed the document of
// loader, and returns the changed channel to wait on when it has not.
func (p *Page) committed(loader proto.NetworkLoaderID) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.loaders {
		if l == loader {
			return true, p.changed
		}
	}
	return false, p.changed
}

func (p *Page) setLoading(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.navSeq++
	}
	p.loading = on
	p.notify()
}

// notify wakes the waiters on changed; p.mu is held.
func (p *Page) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Page) state() (seq int, loading bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.navSeq, p.loading, p.changed
}

// with returns the page bound to ctx limited by d (the page timeout when 0).
func (p *Page) with(ctx context.Context, d time.Duration) (*gorod.Page, context.Context, context.CancelFunc) {
	if d <= 0 {
		d = p.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return p.pg.Context(ctx), ctx, cancel
}

// evalJS calls the JS function fn with args (JSON-encoded) in the main
// frame's current document and returns its value (a promise is awaited), in
// one round trip bounded by d (the page timeout when 0). It is
// Runtime.evaluate with no execution context: the call runs in whatever
// document the frame holds when it arrives. rod's own Eval calls a function
// on the window object it cached, which a navigation leaves stale: the first
// call on every new document failed ("Cannot find context"), then rod
// resolved the window again and called once more — three round trips where
// one does, and on a busy machine the failed one alone took 50–370 ms (a CDP
// log of pem demo's P1 round: 28 such failures, 5 s of waiting).
func (p *Page) evalJS(ctx context.Context, d time.Duration, fn string, args ...any) (*proto.RuntimeRemoteObject, error) {
	var call strings.Builder
	call.WriteString("(")
	call.WriteString(fn)
	call.WriteString(")(")
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			call.WriteString(",")
		}
		call.Write(b)
	}
	call.WriteString(")")
	pg, _, cancel := p.with(ctx, d)
	defer cancel()
	res, err := proto.RuntimeEvaluate{Expression: call.String(), AwaitPromise: true, ReturnByValue: true}.Call(pg)
	if err != nil {
		return nil, err
	}
	if res.ExceptionDetails != nil {
		return nil, &gorod.EvalError{RuntimeExceptionDetails: res.ExceptionDetails}
	}
	return res.Result, nil
}

// readJS is evalJS for pem's reads of the page (listings, text): when the
// read times out or is cancelled, the script is stopped (stopScript), so
// that it does not keep the page's main thread busy after pem has given up
// on it — a busy main thread delays everything after it, the next
// navigation's commit included.
func (p *Page) readJS(ctx context.Context, d time.Duration, fn string, args ...any) (*proto.RuntimeRemoteObject, error) {
	v, err := p.evalJS(ctx, d, fn, args...)
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		p.stopScript()
	}
	return v, err
}

// stopScript stops the JavaScript running in the page's main thread
// (Runtime.terminateExecution): pem's read that timed out, or the page's own
// script if that is what holds the thread. On an idle page it stops nothing
// (the next script runs normally). It waits at most stopTimeout.
func (p *Page) stopScript() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_ = proto.RuntimeTerminateExecution{}.Call(p.pg.Context(ctx))
}

// refreshRod has rod resolve the current document's window, which its
// element lookups (Click, Type, Text of a selector) start from, while the
// caller waits for the page to settle; the returned func waits for it. After
// a navigation rod's cached window is stale, and the first lookup would
// otherwise pay the failed call and the re-resolve after the settle.
func (p *Page) refreshRod(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pg, _, cancel := p.with(ctx, settleMax)
		defer cancel()
		_, _ = pg.Eval(`() => 0`)
	}()
	return func() { <-done }
}

// armNav makes the page note a navigation request the moment it happens
// (the Navigation API's navigate event fires synchronously in the click or
// submit that causes it); navigating reads the note. Chromium's own
// loading events can reach us hundreds of milliseconds late on a busy
// machine, so they cannot tell alone whether an action navigates. A
// download (<a download>) is not noted: it shows no new page, and the tab
// stays where it is.
func (p *Page) armNav(ctx context.Context) {
	_, _ = p.evalJS(ctx, 0, `() => {
		window.__pemNav = 0;
		if (!window.__pemNavHooked && window.navigation) {
			window.__pemNavHooked = 1;
			navigation.addEventListener("navigate", (e) => { if (!e.downloadRequest) window.__pemNav = 1 });
		}
	}`)
}

// mark is the page's navigation state before an action (see land).
type mark struct {
	seq int
	navCount
}

// mark notes the navigation state before an action.
func (p *Page) mark() mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return mark{seq: p.navSeq, navCount: p.nav}
}

// navSnap is the navigation state now, with the channel to wait on for a change.
type navSnap struct {
	seq     int
	loading bool
	navCount
	changed <-chan struct{}
}

func (p *Page) snap() navSnap {
	p.mu.Lock()
	defer p.mu.Unlock()
	return navSnap{seq: p.navSeq, loading: p.loading, navCount: p.nav, changed: p.changed}
}

// moved reports whether the main frame has shown any sign of a navigation
// since m: a load or a navigation started or requested, a commit, a
// same-document change.
func (s navSnap) moved(m mark) bool {
	return s.seq > m.seq || s.requested > m.requested || s.started > m.started || s.commits > m.commits || s.within > m.within
}

// navigating reports whether the action after m started a navigation of the
// main frame. Chromium's events say so when they have come (they can reach
// us hundreds of milliseconds late on a busy machine); else the page's own
// note of a navigate event (armNav) does, in one round trip. A page too
// busy to answer that has not navigated unless the events say it has.
func (p *Page) navigating(ctx context.Context, m mark) bool {
	if p.snap().moved(m) {
		return true
	}
	v, err := p.evalJS(ctx, 0, `() => window.__pemNav`)
	if err != nil {
		// The document was replaced under the call, or the page is busy:
		// the events tell which.
		return p.snap().moved(m)
	}
	// 0: same document, nothing requested; 1: navigation requested;
	// undefined: the document has already been replaced.
	return v.Value.Nil() || v.Value.Int() != 0
}

// afterAction waits, after a click or a key press noted by m, for what the
// action did to the page: when it started a navigation, for the new
// document to commit (the page then settles as after Navigate) or for the
// same-document change; else for the DOM to go quiet, and if a script
// navigated meanwhile, for that navigation in turn (at most settleMax). A
// navigation that was started but shows no new page within the budget is an
// error that says what the tab shows (land), never ok on the old document.
func (p *Page) afterAction(ctx context.Context, op string, m mark) error {
	budget := p.timeout
	if !p.navigating(ctx, m) {
		p.quiet(ctx, true)
		if !p.snap().moved(m) {
			return nil
		}
		budget = settleMax // a script navigated after the action
	}
	newDoc, err := p.land(ctx, op, m, budget)
	if err != nil {
		return err
	}
	if !newDoc {
		p.quiet(ctx, true)
		return nil
	}
	defer p.refreshRod(ctx)()
	if p.quiet(ctx, false) {
		p.waitStopped(ctx, 500*time.Millisecond) // let the loading events catch up
	}
	return nil
}

// land waits up to budget for the navigation started after m to show a
// page: a new document committed in the main frame (newDoc) or a
// same-document navigation done. A navigation that ends with no new
// document (a 204, a download, one cancelled) or that has not committed
// when the budget is spent (a slow server; a renderer whose main thread is
// busy commits only when it is free) is an error naming the destination and
// the page the tab shows; the latter is stopped first. When nothing at all
// happened within the budget (a navigate event that the page cancelled),
// there was no navigation: newDoc is false, err nil.
func (p *Page) land(ctx context.Context, op string, m mark, budget time.Duration) (newDoc bool, err error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var stopped <-chan time.Time // the grace after loading stopped with no commit
	for {
		s := p.snap()
		if s.commits > m.commits {
			return true, nil
		}
		crossPending := s.started > m.started && s.crossDoc
		if s.within > m.within && !crossPending {
			return false, nil
		}
		if s.seq > m.seq && !s.loading && s.within == m.within && stopped == nil {
			// Loading stopped with no new document: a 204, a download, a
			// cancelled navigation — unless the commit's event is only late
			// (events of two renderers, on a cross-site navigation).
			stopped = time.After(noPageGrace)
		}
		select {
		case <-s.changed:
			continue
		case <-stopped:
			if s := p.snap(); s.commits == m.commits && s.within == m.within && !s.loading {
				return false, fmt.Errorf("%s: the navigation it started to %s showed no page (an empty response such as a 204, a download, or a navigation cancelled by another); the tab still shows %s", op, dest(s, m), p.URL())
			}
			stopped = nil
			continue
		case <-wctx.Done():
		}
		s = p.snap()
		if s.commits > m.commits || s.within > m.within && !(s.started > m.started && s.crossDoc) {
			continue // it came at the deadline
		}
		if !s.moved(m) {
			return false, nil
		}
		return false, p.abandonAction(ctx, op, dest(s, m), time.Since(start))
	}
}

// noPageGrace is how long land waits, after the main frame stopped loading
// with no new document, for a commit whose event comes late before it calls
// the navigation one that showed no page.
const noPageGrace = 100 * time.Millisecond

// dest is the destination of the navigation started after m, as far as
// the events tell.
func dest(s navSnap, m mark) string {
	if (s.requested > m.requested || s.started > m.started) && s.dest != "" {
		return s.dest
	}
	return "another page"
}

// abandonAction stops the navigation an action started that has not
// committed after waited, so that it cannot commit later, and returns the
// error saying so. A renderer that is ready to commit but whose main thread
// is busy (the old page's own script) cannot be stopped: Chromium holds the
// stop until the commit. When the main frame is still loading after the
// stop, or the page does not answer a trivial script (unresponsive), the
// error says that the tab may still change.
func (p *Page) abandonAction(ctx context.Context, op, to string, waited time.Duration) error {
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	_ = proto.PageStopLoading{}.Call(p.pg.Context(sctx))
	cancel()
	p.waitStopped(ctx, stopTimeout)
	shown := p.URL()
	// Not loading after the stop is no proof on a busy renderer: Chromium
	// may report the frame stopped and still commit the navigation once the
	// old page's script lets go (seen 2 of 5 runs of
	// TestClickNavigationBusyPage's Enter case). A page that does not
	// answer a trivial script now may still change.
	// (A cancelled caller is not kept waiting for that probe.)
	loading := p.snap().loading
	if err := ctx.Err(); err != nil {
		if loading {
			return fmt.Errorf("%s: %w before the page it opened (%s) was shown; the tab still shows %s, but the navigation could not be stopped and may still replace it: read the page again before relying on it", op, err, to, shown)
		}
		return fmt.Errorf("%s: %w before the page it opened (%s) was shown; the navigation was stopped and the tab still shows %s", op, err, to, shown)
	}
	if loading || p.unresponsive() {
		return fmt.Errorf("%s: timed out after %s waiting for the navigation it started to %s to commit (the page's main thread is busy); the tab still shows %s, but the navigation could not be stopped and may still replace it: read the page again before relying on it, or navigate anew", op, waited.Round(100*time.Millisecond), to, shown)
	}
	return fmt.Errorf("%s: timed out after %s waiting for the navigation it started to %s to commit (a slow server, or a busy page); the navigation was stopped and the tab still shows %s: retry, raise the page timeout, or navigate to it", op, waited.Round(100*time.Millisecond), to, shown)
}

// hookJS runs at the start of every document the page loads: it records
// when the DOM last changed, so that settle counts the quiet time that has
// already passed instead of opening a fresh window on every call.
const hookJS = `(() => {
	const k = Symbol.for("pem.settle");
	if (window[k]) return;
	const st = { last: performance.now() };
	Object.defineProperty(window, k, { value: st });
	new MutationObserver(() => { st.last = performance.now() }).observe(document,
		{ subtree: true, childList: true, attributes: true, characterData: true });
})()`

// settle waits for a navigation (when one was started after seq0) to load,
// at most the page timeout, then for the DOM to go quiet.
func (p *Page) settle(ctx context.Context, seq0 int, navigating bool) {
	if navigating {
		p.waitLoaded(ctx, seq0, p.timeout)
		defer p.refreshRod(ctx)()
	}
	p.quiet(ctx, !navigating)
	if seq, _, _ := p.state(); seq > seq0 && !navigating { // a script navigated meanwhile
		p.waitLoaded(ctx, seq0, settleMax)
		defer p.refreshRod(ctx)()
		p.quiet(ctx, false)
	}
}

// quiet waits, in one evaluation, until the document has loaded (at most
// settleMax) and its DOM has not changed for settleQuiet (at most quietMax
// after the load). On a new document the quiet time since its last change
// counts; fresh (after an action in the same document) opens the window now.
// It reports whether the page settled in time; a page that does not is used
// as it is. A new document under agent.SettleAtLoad (a replay whose next
// step clicks a link) is settled at its load event, with no quiet window.
func (p *Page) quiet(ctx context.Context, fresh bool) bool {
	qctx, cancel := context.WithTimeout(ctx, settleMax+500*time.Millisecond)
	defer cancel()
	q := settleQuiet
	if !fresh && agent.SettlesAtLoad(ctx) {
		q = 0
	}
	arg := map[string]any{"quiet": q, "cap": settleMax.Milliseconds(), "quietCap": quietMax.Milliseconds(), "fresh": fresh}
	v, err := p.evalJS(qctx, settleMax+500*time.Millisecond, pageJS, "settle", arg, 0)
	return err == nil && v.Value.Bool()
}

// waitStopped waits until the main frame is not loading, or d passes.
func (p *Page) waitStopped(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		_, loading, changed := p.state()
		if !loading {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// waitLoaded waits until a main-frame navigation started after seq0 has
// stopped loading, or d passes.
func (p *Page) waitLoaded(ctx context.Context, seq0 int, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		seq, loading, changed := p.state()
		if seq > seq0 && !loading {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// lookup finds selector within the timeout; a miss wraps agent.ErrNoElement.
// The element comes back bound to a fresh timeout for the action on it, so
// a slow lookup does not starve the action.
func (p *Page) lookup(ctx context.Context, op, selector string) (*gorod.Element, context.CancelFunc, error) {
	pg, _, cancel := p.with(ctx, 0)
	el, err := pg.Element(selector)
	cancel()
	if err != nil {
		return nil, func() {}, p.lookupErr(op, selector, err)
	}
	actx, cancel := context.WithTimeout(ctx, p.timeout)
	return el.Context(actx), cancel, nil
}

func (p *Page) lookupErr(op, selector string, err error) error {
	return p.lookupErrAfter(op, selector, err, p.timeout)
}

// lookupErrAfter is lookupErr for a lookup that waited up to waited: a
// timeout on a page that does not answer is not a missing element (busyErr).
func (p *Page) lookupErrAfter(op, selector string, err error, waited time.Duration) error {
	var ee *gorod.EvalError
	switch {
	case errors.As(err, &ee):
		return fmt.Errorf("%s %q: invalid selector: %s", op, selector, ee.Exception.Description)
	case errors.Is(err, context.DeadlineExceeded):
		if p.unresponsive() {
			return p.busyErr(op, selector, waited)
		}
		return fmt.Errorf("%s %q: %w (waited up to %s on %s)", op, selector, agent.ErrNoElement, waited, p.URL())
	}
	return fmt.Errorf("%s %q: %w", op, selector, err)
}

// unresponsive reports whether the page fails to answer a trivial script
// within existsTimeout: after a lookup timed out, it tells a page whose main
// thread is busy (or whose renderer hung) from one where nothing matches. A
// busy page is not a drifted selector: reported as absence, it counted
// against the route (selector_drift, the route's fault) for the page's own
// slowness.
func (p *Page) unresponsive() bool {
	ctx, cancel := context.WithTimeout(context.Background(), existsTimeout)
	defer cancel()
	_, err := p.evalJS(ctx, existsTimeout, `() => 1`)
	return err != nil && errors.Is(err, context.DeadlineExceeded)
}

// busyErr is the error of a lookup on a page that did not answer.
func (p *Page) busyErr(op, selector string, waited time.Duration) error {
	return fmt.Errorf("%s %q: %s did not answer for %s (its script is busy or the renderer hung), so whether the element is there is unknown: timed out; wait and retry, or raise the page timeout", op, selector, p.URL(), waited)
}

// actErr explains why an action on a found element failed (usually a timeout
// waiting for it to become visible or uncovered).
func (p *Page) actErr(op, selector string, el *gorod.Element, err error) error {
	var cov *gorod.CoveredError
	var inv *gorod.InvisibleShapeError
	var npe *gorod.NoPointerEventsError
	switch {
	case errors.As(err, &cov):
		return fmt.Errorf("%s %q: element is covered by %s", op, selector, describe(cov.Element))
	case errors.As(err, &inv):
		return fmt.Errorf("%s %q: element is not visible", op, selector)
	case errors.As(err, &npe):
		return fmt.Errorf("%s %q: element ignores pointer events", op, selector)
	case errors.Is(err, context.DeadlineExceeded):
		// Diagnose with a fresh short context.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		el := el.Context(ctx)
		if vis, verr := el.Visible(); verr == nil && !vis {
			return fmt.Errorf("%s %q: element is not visible (waited %s)", op, selector, p.timeout)
		}
		if _, ierr := el.Interactable(); errors.As(ierr, &cov) {
			return fmt.Errorf("%s %q: element is covered by %s (waited %s)", op, selector, describe(cov.Element), p.timeout)
		}
		return fmt.Errorf("%s %q: timed out after %s: %w", op, selector, p.timeout, err)
	}
	return fmt.Errorf("%s %q: %w", op, selector, err)
}

func describe(el *gorod.Element) string {
	if el == nil {
		return "another element"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := el.Context(ctx).Eval(`() => this.tagName.toLowerCase() + (this.id ? "#" + this.id : "") + (typeof this.className === "string" && this.className ? "." + this.className.trim().split(/\s+/).join(".") : "")`)
	if err != nil {
		return "another element"
	}
	return res.Value.Str()
}

// Navigate loads url and waits for settle: the load event (at most
// settleMax after the document commits; a slow subresource does not fail the
// navigation) and a quiet DOM.
//
// It returns nil only once the main frame has committed the new document
// (its loader id, from Page.frameNavigated): Page.navigate answers as soon
// as the response is ready, before the renderer commits, and a renderer whose
// main thread is busy (a long script: a read of pem's that timed out, or the
// page's own) commits only when it is free — the tab kept showing the old
// page. So the old document's running script, if any, is stopped first
// (stopScript; the document is being left, and an idle one is not affected:
// after Page.navigate Chromium holds protocol messages to the renderer until
// the commit, so the stop cannot come later). If the commit does not come
// within the page timeout, the navigation is stopped and Navigate returns an
// error saying which document the tab still shows.
func (p *Page) Navigate(ctx context.Context, url string) error {
	pg, _, cancel := p.with(ctx, 0)
	defer cancel()
	if url == "" {
		url = "about:blank"
	}
	_ = proto.PageStopLoading{}.Call(pg)
	p.stopScript()
	start := time.Now()
	res, err := proto.PageNavigate{URL: url}.Call(pg)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return p.abandon(ctx, url, fmt.Sprintf("no answer within %s (a slow server)", time.Since(start).Round(100*time.Millisecond)))
		}
		return fmt.Errorf("navigate %s: %w", url, err)
	}
	if res.ErrorText != "" {
		if strings.Contains(res.ErrorText, "ERR_ABORTED") {
			// A 204, a download, a navigation cancelled by another: no new
			// document, the old one stays.
			return fmt.Errorf("navigate %s: %s: no page was shown (an empty response, a download, or a navigation cancelled by another); the tab still shows %s", url, res.ErrorText, p.URL())
		}
		return fmt.Errorf("navigate %s: %s (check the URL and that the site is up, then retry)", url, res.ErrorText)
	}
	if res.LoaderID != "" {
		if !p.waitCommitted(ctx, res.LoaderID, p.timeout) {
			return p.abandon(ctx, url, fmt.Sprintf("the new document did not commit within %s (the renderer's main thread stayed busy)", time.Since(start).Round(100*time.Millisecond)))
		}
		defer p.refreshRod(ctx)()
	}
	if p.quiet(ctx, res.LoaderID == "") && res.LoaderID != "" {
		// The new document has loaded: let the loading events catch up.
		p.waitStopped(ctx, 500*time.Millisecond)
	}
	return nil
}

// abandon stops a navigation to url that has not committed, so that it
// cannot commit later, and returns the error saying why and what to do.
func (p *Page) abandon(ctx context.Context, url, why string) error {
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	_ = proto.PageStopLoading{}.Call(p.pg.Context(sctx))
	cancel()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("navigate %s: %w before the new page was shown; the navigation was stopped and the tab still shows %s", url, err, p.URL())
	}
	return fmt.Errorf("navigate %s: %s; the navigation was stopped and the tab still shows %s: retry it, raise the page timeout, or open a new page", url, why, p.URL())
}

// waitCommitted waits until the main frame has committed the document of
// loader, or d passes, or ctx is done; it reports whether it has.
func (p *Page) waitCommitted(ctx context.Context, loader proto.NetworkLoaderID, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		ok, changed := p.committed(loader)
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			ok, _ = p.committed(loader)
			return ok
		}
	}
}

// URL is the main frame's current URL, as last reported by Chromium.
func (p *Page) URL() string {
	p.mu.Lock()
	u := p.url
	p.mu.Unlock()
	if u != "" {
		return u
	}
	info, err := p.info(context.Background())
	if err != nil {
		return ""
	}
	return info.URL
}

func (p *Page) info(ctx context.Context) (*proto.TargetTargetInfo, error) {
	pg, _, cancel := p.with(ctx, 2*time.Second)
	defer cancel()
	return pg.Info()
}

// Title is document.title.
func (p *Page) Title(ctx context.Context) (string, error) {
	info, err := p.info(ctx)
	if err != nil {
		return "", fmt.Errorf("title: %w", err)
	}
	return info.Title, nil
}

// StatusCode is the HTTP status of the current document's response (0 when unknown).
func (p *Page) StatusCode(ctx context.Context) int {
	v, err := p.evalJS(ctx, 2*time.Second, `() => { const n = performance.getEntriesByType("navigation")[0]; return n && n.responseStatus || 0 }`)
	if err != nil {
		return 0
	}
	return v.Value.Int()
}

// Click clicks the element's center like a user and waits for settle.
func (p *Page) Click(ctx context.Context, selector string) error {
	el, cancel, err := p.lookup(ctx, "click", selector)
	defer cancel()
	if err != nil {
		return err
	}
	pt, err := p.reachable(ctx, el)
	if err != nil {
		return p.actErr("click", selector, el, err)
	}
	p.armNav(ctx)
	m := p.mark()
	op := fmt.Sprintf("click %q", selector)
	if err := p.clickAt(ctx, *pt); err != nil && !p.snap().moved(m) {
		return p.inputErr(ctx, op, err)
	}
	// Sent, or it started a navigation before the page stopped answering
	// (a submit whose handler then keeps the page busy): what counts is
	// whether that lands, which afterAction says.
	return p.afterAction(ctx, op, m)
}

// clickAt moves the mouse to pt and clicks its left button, each event
// bounded by ctx and the page timeout. rod's Mouse (and Keyboard) send on the
// page they were made for, whose context has no deadline: a page whose
// handler is busy (or a hung renderer) held the click, the run and the
// user's Ctrl-C for as long as it did not answer.
func (p *Page) clickAt(ctx context.Context, pt proto.Point) error {
	pg, unlock, err := p.front(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	none, left := 0, 1
	for _, ev := range []proto.InputDispatchMouseEvent{
		{Type: proto.InputDispatchMouseEventTypeMouseMoved, X: pt.X, Y: pt.Y, Button: proto.InputMouseButtonNone, Buttons: &none},
		{Type: proto.InputDispatchMouseEventTypeMousePressed, X: pt.X, Y: pt.Y, Button: proto.InputMouseButtonLeft, Buttons: &left, ClickCount: 1},
		{Type: proto.InputDispatchMouseEventTypeMouseReleased, X: pt.X, Y: pt.Y, Button: proto.InputMouseButtonLeft, Buttons: &none, ClickCount: 1},
	} {
		if err := ev.Call(pg); err != nil {
			return err
		}
	}
	return nil
}

// front makes the tab the browser's front one and holds it there for input
// until unlock: it returns the page bound by ctx and the page timeout.
// Chromium delivers input to a background tab only after seconds, if at
// all: a link with target=_blank brings the tab it opens to the front, and
// of several runs in tabs of one browser (browser_agents_run) only the
// newest tab's clicks were prompt — the others took ~5 s each, and once
// bounded by the page timeout they timed out. The browser's input lock keeps
// another tab from taking the front between the two.
func (p *Page) front(ctx context.Context) (*gorod.Page, func(), error) {
	pg, _, cancel := p.with(ctx, 0)
	if p.input != nil {
		p.input.Lock()
	}
	unlock := func() {
		if p.input != nil {
			p.input.Unlock()
		}
		cancel()
	}
	if err := (proto.PageBringToFront{}).Call(pg); err != nil {
		unlock()
		return nil, nil, err
	}
	return pg, unlock, nil
}

// pressKey presses and releases k, bounded like clickAt.
func (p *Page) pressKey(ctx context.Context, k input.Key) error {
	pg, unlock, err := p.front(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := k.Encode(proto.InputDispatchKeyEventTypeKeyDown, 0).Call(pg); err != nil {
		return err
	}
	return k.Encode(proto.InputDispatchKeyEventTypeKeyUp, 0).Call(pg)
}

// inputErr explains an input event the page did not take: a timeout means
// the page did not answer (its script busy, the renderer hung), and the
// action may or may not have happened.
func (p *Page) inputErr(ctx context.Context, op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%s: %s did not take the input within %s (its script is busy or the renderer hung); the action may or may not have happened: check the page before repeating it: %w", op, p.URL(), p.timeout, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// reachable scrolls el into view and waits (within el's context) until a
// point of it can receive the mouse: visible and not covered. Unlike rod's
// own helpers it does not wait on requestAnimationFrame, which never fires in
// a background tab.
func (p *Page) reachable(ctx context.Context, el *gorod.Element) (*proto.Point, error) {
	var last error
	for {
		if err := (proto.DOMScrollIntoViewIfNeeded{ObjectID: el.Object.ObjectID}).Call(el); err != nil && last == nil {
			last = err
		}
		pt, err := el.Interactable()
		if err == nil {
			return pt, nil
		}
		var cov *gorod.CoveredError
		var inv *gorod.InvisibleShapeError
		if !errors.As(err, &cov) && !errors.As(err, &inv) {
			if last != nil && errors.Is(err, context.DeadlineExceeded) {
				return nil, last
			}
			return nil, err
		}
		last = err
		select {
		case <-el.GetContext().Done():
			return nil, last
		case <-ctx.Done():
			return nil, last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// focus focuses el without rod's requestAnimationFrame waits.
func (p *Page) focus(el *gorod.Element) error {
	_ = proto.DOMScrollIntoViewIfNeeded{ObjectID: el.Object.ObjectID}.Call(el)
	_, err := el.Eval(`() => this.focus()`)
	return err
}

// Type clears the field and inserts text; the text never appears in errors.
func (p *Page) Type(ctx context.Context, selector, text string) error {
	el, cancel, err := p.lookup(ctx, "type into", selector)
	defer cancel()
	if err != nil {
		return err
	}
	if _, err := p.reachable(ctx, el); err != nil {
		return p.actErr("type into", selector, el, err)
	}
	if _, err := el.Eval(`function () {
		if ("value" in this) { this.value = ""; this.dispatchEvent(new Event("input", {bubbles: true})) }
		else if (this.isContentEditable) { this.textContent = "" }
	}`); err != nil {
		return fmt.Errorf("type into %q: %w", selector, err)
	}
	if err := p.focus(el); err != nil {
		return fmt.Errorf("type into %q: %w", selector, err)
	}
	if err := (proto.InputInsertText{Text: text}).Call(el); err != nil {
		return fmt.Errorf("type into %q: inserting text failed", selector)
	}
	_, _ = el.Eval(`function () {
		this.dispatchEvent(new Event("input", {bubbles: true}));
		this.dispatchEvent(new Event("change", {bubbles: true}))
	}`)
	return nil
}

var keys = map[string]input.Key{
	"enter": input.Enter, "tab": input.Tab, "escape": input.Escape, "esc": input.Escape,
	"backspace": input.Backspace, "delete": input.Delete, "space": input.Space,
	"arrowdown": input.ArrowDown, "arrowup": input.ArrowUp, "arrowleft": input.ArrowLeft,
	"arrowright": input.ArrowRight, "pagedown": input.PageDown, "pageup": input.PageUp,
	"home": input.Home, "end": input.End,
}

// Press focuses the element and presses key ("Enter", "Tab", "Escape",
// "ArrowDown", … or a single character), then waits for settle.
func (p *Page) Press(ctx context.Context, selector, key string) error {
	k, ok := keys[strings.ToLower(key)]
	if !ok {
		if r := []rune(key); len(r) == 1 {
			k = input.Key(r[0])
		} else {
			return fmt.Errorf("press %q in %q: unknown key", key, selector)
		}
	}
	el, cancel, err := p.lookup(ctx, "press "+key+" in", selector)
	defer cancel()
	if err != nil {
		return err
	}
	if err := p.focus(el); err != nil {
		return fmt.Errorf("press %s in %q: %w", key, selector, err)
	}
	p.armNav(ctx)
	m := p.mark()
	op := fmt.Sprintf("press %s in %q", key, selector)
	if err := p.pressKey(ctx, k); err != nil && !p.snap().moved(m) {
		return p.inputErr(ctx, op, err)
	}
	return p.afterAction(ctx, op, m) // as in Click
}

// Text is the element's innerText (an input's value); "" reads the whole body.
func (p *Page) Text(ctx context.Context, selector string) (string, error) {
	if selector == "" {
		v, err := p.readJS(ctx, 0, `() => document.body ? document.body.innerText : ""`)
		if err != nil {
			return "", fmt.Errorf("text of body on %s: %w", p.URL(), err)
		}
		return v.Value.Str(), nil
	}
	// One round trip when the element is there (rod's lookup and text
	// helper take about ten); a missing one is waited for as before.
	if v, err := p.readJS(ctx, 0, textJS, selector); err == nil && !v.Value.Nil() {
		return v.Value.Str(), nil
	}
	el, cancel, err := p.lookup(ctx, "text of", selector)
	defer cancel()
	if err != nil {
		return "", err
	}
	t, err := el.Text()
	if err != nil {
		return "", fmt.Errorf("text of %q: %w", selector, err)
	}
	return t, nil
}

// textJS is rod's text helper (the text Element.Text returns) for the first
// element selector matches, or null when none does.
const textJS = `(sel) => {
	const el = document.querySelector(sel);
	if (!el) return null;
	switch (el.tagName) {
	case "INPUT": case "TEXTAREA": return el.value || el.placeholder;
	case "SELECT": return Array.from(el.selectedOptions).map((o) => o.innerText).join();
	case undefined: return el.textContent;
	default: return el.innerText;
	}
}`

// Exists reports whether selector matches a visible element. It asks the
// page once (one document.querySelector, no polling), so absence is answered
// in one round trip → agent.ErrNoElement. The answer may take up to
// existsTimeout on a busy machine; a page that does not answer in time is an
// error, never reported as absence.
func (p *Page) Exists(ctx context.Context, selector string) (bool, error) {
	v, err := p.evalJS(ctx, existsTimeout, pageJS, "exists", selector, 0)
	if err != nil {
		var ee *gorod.EvalError
		switch {
		case errors.As(err, &ee):
			return false, fmt.Errorf("exists %q: invalid selector: %s", selector, ee.Exception.Description)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return false, fmt.Errorf("exists %q: %s did not answer within %s (busy or hung page; retry or raise the load budget): %w", selector, p.URL(), existsTimeout, err)
		}
		return false, fmt.Errorf("exists %q on %s: %w", selector, p.URL(), err)
	}
	switch v.Value.Int() {
	case 0:
		return false, fmt.Errorf("exists %q: %w (on %s)", selector, agent.ErrNoElement, p.URL())
	case 1:
		return false, nil
	}
	return true, nil
}

// Elements lists up to limit elements matching selector without waiting
// ("" = the visible interactive ones), each with a unique selector.
func (p *Page) Elements(ctx context.Context, selector string, limit int) ([]agent.Element, error) {
	var out []agent.Element
	if err := p.helper(ctx, &out, "elements", selector, limit); err != nil {
		return nil, fmt.Errorf("elements %q on %s: %w", selector, p.URL(), err)
	}
	return out, nil
}

// Blocks lists the page's readable blocks (see agent.Reader).
// A long page (a changelog) has a thousand blocks and takes seconds to
// list on a busy machine: it gets three page timeouts.
func (p *Page) Blocks(ctx context.Context) ([]agent.Block, error) {
	var out []agent.Block
	if err := p.helperFor(ctx, 3*p.timeout, &out, "blocks", "", 3000); err != nil {
		return nil, fmt.Errorf("blocks on %s: %w", p.URL(), err)
	}
	return out, nil
}

var _ agent.Reader = (*Page)(nil)

// Describe describes the first element selector matches (see agent.Describer).
func (p *Page) Describe(ctx context.Context, selector string) (agent.Element, bool, error) {
	var out []agent.Element
	if err := p.helper(ctx, &out, "elements", selector, 1); err != nil {
		return agent.Element{}, false, fmt.Errorf("describe %q on %s: %w", selector, p.URL(), err)
	}
	if len(out) == 0 {
		return agent.Element{}, false, nil
	}
	return out[0], true, nil
}

var _ agent.Describer = (*Page)(nil)

// Labelled reads label→value pairs (see agent.Page).
func (p *Page) Labelled(ctx context.Context) ([]agent.LabelValue, error) {
	var out []agent.LabelValue
	if err := p.helper(ctx, &out, "labelled", "", 0); err != nil {
		return nil, fmt.Errorf("labelled values on %s: %w", p.URL(), err)
	}
	return out, nil
}

func (p *Page) helper(ctx context.Context, out any, op, arg string, limit int) error {
	return p.helperFor(ctx, 0, out, op, arg, limit)
}

// helperFor is helper with a timeout of d (the page timeout when 0).
func (p *Page) helperFor(ctx context.Context, d time.Duration, out any, op, arg string, limit int) error {
	v, err := p.readJS(ctx, d, pageJS, op, arg, limit)
	if err != nil {
		var ee *gorod.EvalError
		if errors.As(err, &ee) {
			return errors.New(ee.Exception.Description)
		}
		return err
	}
	return json.Unmarshal([]byte(v.Value.JSON("", "")), out)
}

// Evaluate runs js — a function, an expression, or a function body with
// return — and returns the result as JSON text ("null" for undefined).
// A script still running at the page timeout is stopped.
func (p *Page) Evaluate(ctx context.Context, js string) (string, error) {
	pg, _, cancel := p.with(ctx, 0)
	defer cancel()
	src := strings.Trim(js, "\t\n\v\f\r ;")
	forms := []string{"() => (\n" + src + "\n)", "function () {\n" + src + "\n}"}
	if isFunc(src) {
		forms = []string{src}
	}
	var err error
	for _, f := range forms {
		var res *proto.RuntimeRemoteObject
		res, err = pg.Eval(f)
		if err == nil {
			if res.Type == proto.RuntimeRemoteObjectTypeUndefined {
				return "null", nil
			}
			return res.Value.JSON("", ""), nil
		}
		var ee *gorod.EvalError
		if !errors.As(err, &ee) || !strings.Contains(ee.Exception.Description, "SyntaxError") {
			break
		}
	}
	var ee *gorod.EvalError
	if errors.As(err, &ee) {
		return "", fmt.Errorf("evaluate on %s: %s", p.URL(), ee.Exception.Description)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The script would keep running in the page: stop it.
		p.stopScript()
		if ctx.Err() != nil {
			return "", fmt.Errorf("evaluate on %s: %w; the script was stopped", p.URL(), ctx.Err())
		}
		return "", fmt.Errorf("evaluate on %s: the script did not finish within %s and was stopped (make it shorter, or read less at once): %w", p.URL(), p.timeout, err)
	}
	return "", fmt.Errorf("evaluate on %s: %w", p.URL(), err)
}

func isFunc(s string) bool {
	if strings.HasPrefix(s, "function") || strings.HasPrefix(s, "async function") || strings.HasPrefix(s, "async (") {
		return true
	}
	head, _, ok := strings.Cut(s, "=>")
	if !ok {
		return false
	}
	head = strings.TrimSpace(head)
	if strings.HasPrefix(head, "(") && strings.HasSuffix(head, ")") && !strings.Contains(head[1:], "(") {
		return true
	}
	for _, r := range head { // a bare identifier: x => ...
		if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return head != ""
}

// Scroll scrolls the window by dy pixels and waits for settle (lazy content).
func (p *Page) Scroll(ctx context.Context, dy int) error {
	pg, _, cancel := p.with(ctx, 0)
	defer cancel()
	seq0, _, _ := p.state()
	if _, err := pg.Eval(`(dy) => window.scrollBy(0, dy)`, dy); err != nil {
		return fmt.Errorf("scroll %d on %s: %w", dy, p.URL(), err)
	}
	p.settle(ctx, seq0, false)
	return nil
}

// WaitFor waits up to d for selector ("" = wait d, then settle).
func (p *Page) WaitFor(ctx context.Context, selector string, d time.Duration) error {
	if selector == "" {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("wait %s: %w", d, ctx.Err())
		}
		seq, _, _ := p.state()
		p.settle(ctx, seq, false)
		return nil
	}
	pg, _, cancel := p.with(ctx, d)
	defer cancel()
	if _, err := pg.Element(selector); err != nil {
		if ctx.Err() == nil {
			return p.lookupErrAfter("wait for", selector, err, d)
		}
		return p.lookupErr("wait for", selector, err)
	}
	return nil
}

// Screenshot captures the viewport as PNG; over 400 KB it recaptures as a
// JPEG (quality 60) scaled to 1024 px wide.
//
// A background tab renders no frames, so its capture would wait until the
// deadline: the tab is brought to the front first, one capture at a time
// (tabs of parallel runs keep working in the background meanwhile).
func (p *Page) Screenshot(ctx context.Context) ([]byte, string, error) {
	pg, _, cancel := p.with(ctx, 3*p.timeout) // encoding is slow on a busy machine
	defer cancel()
	shotMu.Lock()
	defer shotMu.Unlock()
	if _, err := pg.Activate(); err != nil {
		return nil, "", fmt.Errorf("screenshot of %s: bringing the tab to the front: %w", p.URL(), err)
	}
	png, err := pg.Screenshot(false, &proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatPng})
	if err != nil {
		return nil, "", fmt.Errorf("screenshot of %s: %w", p.URL(), err)
	}
	if len(png) <= maxShot {
		return png, "image/png", nil
	}
	m, err := proto.PageGetLayoutMetrics{}.Call(pg)
	if err != nil {
		return nil, "", fmt.Errorf("screenshot of %s: %w", p.URL(), err)
	}
	vp := m.CSSVisualViewport
	scale := 1.0
	if vp.ClientWidth > shotWidth {
		scale = shotWidth / vp.ClientWidth
	}
	var jpg []byte
	for _, q := range []int{60, 40, 20} { // 60 as designed; lower only if still too big
		jpg, err = pg.Screenshot(false, &proto.PageCaptureScreenshot{
			Format:  proto.PageCaptureScreenshotFormatJpeg,
			Quality: &q,
			Clip:    &proto.PageViewport{X: vp.PageX, Y: vp.PageY, Width: vp.ClientWidth, Height: vp.ClientHeight, Scale: scale},
		})
		if err != nil {
			return nil, "", fmt.Errorf("screenshot of %s: %w", p.URL(), err)
		}
		if len(jpg) <= maxShot {
			break
		}
	}
	return jpg, "image/jpeg", nil
}

// shotMu holds one capture at a time: activation and capture are one step.
var shotMu sync.Mutex

// Close closes the tab.
func (p *Page) Close() error {
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if err := p.pg.Context(ctx).Close(); err != nil && !strings.Contains(err.Error(), "No target") {
		return fmt.Errorf("close page: %w", err)
	}
	return nil
}

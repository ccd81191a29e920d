package rod

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gorod "github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/launcher"
	"github.com/go-rod/rod/lib/proto"

	"github.com/pemdev/pem/agent"
)

// Defaults of Options and the adapter's fixed bounds.
const (
	DefaultTimeout = 5 * time.Second  // element lookups
	settleMax      = 2 * time.Second  // load + DOM settle after an action
	quietMax       = time.Second      // of settleMax, the wait for a quiet DOM after the load
	newPageTimeout = 20 * time.Second // a tab takes ~0.4 s, much longer on a loaded machine
	settleQuiet    = 50               // ms without DOM mutations (counted from the last one) that count as settled
	existsTimeout  = 2 * time.Second  // bound on Exists' single query (one round trip)
	stopTimeout    = time.Second      // bound on Runtime.terminateExecution
	maxShot        = 400 << 10        // bytes; larger screenshots are scaled to JPEG
	shotWidth      = 1024
)

// ErrNoChromium is returned (wrapped, saying what was tried) by Bin and
// Launch when no browser binary is found.
var ErrNoChromium = errors.New("chromium not found")

// Options configure Launch; the zero value means defaults.
type Options struct {
	Bin         string        // default: $PEM_CHROME, else the headless shell (headless runs), else found on PATH or in the usual places (Finder.Find)
	Headful     bool          // show the window (needs a display, and a browser with one: never the headless shell)
	Timeout     time.Duration // element lookups; default DefaultTimeout
	UserDataDir string        // kept on Close when set; default: a fresh temp dir removed on Close
}

// Browser is a launched Chromium. It is safe for concurrent NewPage calls.
type Browser struct {
	b       *gorod.Browser
	l       *launcher.Launcher
	timeout time.Duration
	tmpDir  string     // removed on Close ("" when the caller owns the dir)
	input   sync.Mutex // held while a tab is brought to the front and sent input (Page.front)
}

var _ agent.Browser = (*Browser)(nil)

// Bin resolves the browser binary Launch(o) would start (SystemFinder().Find).
func Bin(o Options) (string, error) {
	return SystemFinder().Find(o.Bin, o.Headful)
}

// Launch starts Chromium and connects to it. ctx bounds the launch only.
func Launch(ctx context.Context, o Options) (*Browser, error) {
	bin, err := Bin(o)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	dir, tmp := o.UserDataDir, ""
	if dir == "" {
		sweepTempDirs()
		if dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, fmt.Errorf("launch %s: %w", bin, err)
		}
		tmp = dir
		// Mark the dir as ours, so a later Launch can remove it if this
		// process is killed before Close.
		_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	l := launcher.New().Context(ctx).
		Bin(bin).
		Leakless(true).
		Headless(!o.Headful).
		UserDataDir(dir).
		Set("no-sandbox").
		Set("disable-gpu").
		Set("disable-background-networking").
		Set("disable-component-update").
		Set("disable-sync").
		Set("no-first-run").
		Set("disable-quic").
		// Keep timers at full speed in tabs that are not in front (parallel
		// runs, headful mode): settle waits on setTimeout in the page.
		Set("disable-background-timer-throttling").
		Set("disable-renderer-backgrounding").
		Set("disable-backgrounding-occluded-windows")
	u, err := l.Launch()
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, fmt.Errorf("launch %s: %w", bin, err)
	}
	// Connect with a lifetime context: rod's event stream lives as long as
	// the context Connect ran with. ctx bounds only the wait.
	b := gorod.New().ControlURL(u)
	connected := make(chan error, 1)
	go func() { connected <- b.Connect() }()
	select {
	case err = <-connected:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		l.Kill()
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, fmt.Errorf("connect to %s at %s: %w", bin, u, err)
	}
	return &Browser{b: b, l: l, timeout: o.Timeout, tmpDir: tmp}, nil
}

// NewPage opens a blank tab.
func (b *Browser) NewPage(ctx context.Context) (agent.Page, error) {
	return b.Open(ctx)
}

// Open is NewPage with the concrete type, for callers that want Page's extras.
func (b *Browser) Open(ctx context.Context) (*Page, error) {
	// The page keeps the context it was created with, so create it with its
	// lifetime context and bound only the creation by ctx.
	life, stop := context.WithCancel(context.Background())
	created := make(chan struct{})
	defer close(created)
	go func() {
		t := time.NewTimer(newPageTimeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			stop()
		case <-t.C:
			stop()
		case <-created:
		}
	}()
	pg, err := b.b.Context(life).Page(proto.TargetCreateTarget{URL: "about:blank"})
	if err != nil {
		stop()
		return nil, fmt.Errorf("new page: %w", err)
	}
	if _, err := (proto.PageAddScriptToEvaluateOnNewDocument{Source: hookJS}).Call(pg.Context(ctx)); err != nil {
		_ = pg.Close()
		stop()
		return nil, fmt.Errorf("new page: installing the settle hook: %w", err)
	}
	return newPage(pg, b.timeout, stop, &b.input), nil
}

// Close closes Chromium and removes its temp user-data-dir. It is idempotent.
func (b *Browser) Close() error {
	if b == nil || b.b == nil {
		return nil
	}
	err := b.b.Close()
	if !waitExit(b.l.PID(), 3*time.Second) {
		b.l.Kill()
	}
	if b.tmpDir != "" {
		if rerr := os.RemoveAll(b.tmpDir); rerr != nil && err == nil {
			err = rerr
		}
	}
	b.b = nil
	if err != nil && strings.Contains(err.Error(), "closed") {
		err = nil
	}
	return err
}

// Rod is the go-rod browser underneath, for callers that need the DevTools
// protocol itself (a test watching the console and the network). Close
// stays Browser's.
func (b *Browser) Rod() *gorod.Browser { return b.b }

// PID is Chromium's process id.
func (b *Browser) PID() int { return b.l.PID() }

// waitExit polls until process pid is gone or d passes.
func waitExit(pid int, d time.Duration) bool {
	if pid <= 0 {
		return true
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !processAlive(pid) {
			return true
		}
	}
	return false
}

const (
	tempPrefix = "pem-chromium-"
	ownerFile  = "pem-owner.pid"
)

// sweepTempDirs removes user-data-dirs left by pem processes that were
// killed before they could Close (leakless stops their Chromium, but not
// the dir). A dir whose owner still runs, or that is less than a minute
// old, is kept.
func sweepTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not ours, or not marked
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		os.RemoveAll(d)
	}
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

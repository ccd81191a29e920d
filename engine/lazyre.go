package engine

import (
	"regexp"
	"sync"
)

// LazyRegexp is a regular expression compiled on its first use, not when the
// program starts: `pem --help`, `pem log` or a query does not pay for the
// expressions of the failure classifier, the injection screen, the secret
// scanner, the agent's readers and deep-learn's miners it never runs
// (docs/performance.md, start-up). Its methods are those of *regexp.Regexp.
// It is safe for concurrent use.
type LazyRegexp struct {
	once sync.Once
	src  string
	re   *regexp.Regexp
}

var (
	lazyMu  sync.Mutex
	allLazy []*LazyRegexp // every expression, for the test that compiles them all
)

// LazyRE returns src as a LazyRegexp; a bad src panics on first use (as
// regexp.MustCompile would at start-up), which the tests of every package
// using it catch (AllLazyCompile).
func LazyRE(src string) *LazyRegexp {
	l := &LazyRegexp{src: src}
	lazyMu.Lock()
	allLazy = append(allLazy, l)
	lazyMu.Unlock()
	return l
}

// AllLazyCompile compiles every LazyRegexp made so far and returns their
// number, or the first error: a test of each package that declares some.
func AllLazyCompile() (int, error) {
	lazyMu.Lock()
	all := append([]*LazyRegexp(nil), allLazy...)
	lazyMu.Unlock()
	for _, l := range all {
		if _, err := regexp.Compile(l.src); err != nil {
			return 0, err
		}
	}
	return len(all), nil
}

// Regexp returns the compiled expression.
func (l *LazyRegexp) Regexp() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.src) })
	return l.re
}

func (l *LazyRegexp) String() string                       { return l.src }
func (l *LazyRegexp) MatchString(s string) bool            { return l.Regexp().MatchString(s) }
func (l *LazyRegexp) FindString(s string) string           { return l.Regexp().FindString(s) }
func (l *LazyRegexp) FindStringIndex(s string) []int       { return l.Regexp().FindStringIndex(s) }
func (l *LazyRegexp) FindStringSubmatch(s string) []string { return l.Regexp().FindStringSubmatch(s) }
func (l *LazyRegexp) FindStringSubmatchIndex(s string) []int {
	return l.Regexp().FindStringSubmatchIndex(s)
}
func (l *LazyRegexp) FindAllString(s string, n int) []string { return l.Regexp().FindAllString(s, n) }
func (l *LazyRegexp) ReplaceAllString(s, repl string) string {
	return l.Regexp().ReplaceAllString(s, repl)
}
func (l *LazyRegexp) FindAllStringIndex(s string, n int) [][]int {
	return l.Regexp().FindAllStringIndex(s, n)
}
func (l *LazyRegexp) FindAllStringSubmatch(s string, n int) [][]string {
	return l.Regexp().FindAllStringSubmatch(s, n)
}
func (l *LazyRegexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return l.Regexp().FindAllStringSubmatchIndex(s, n)
}
func (l *LazyRegexp) ReplaceAllStringFunc(s string, f func(string) string) string {
	return l.Regexp().ReplaceAllStringFunc(s, f)
}

package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// ErrBadURL is returned for a URL pem cannot key knowledge on: unparsable, not
// http(s), or without a host.
var ErrBadURL = errors.New("bad URL")

// maxURL caps a URL's length, raw and normalized.
const maxURL = 8192

// volatileParams are query keys that never change what kind of page is shown:
// tracking (utm_* too), and per-visit session, query and click ids. They are
// dropped by NormalizeURL, so one page type has one pattern (Amazon's
// "/s?k=*&qid=*" is "/s?k=*"). The one list of them.
var volatileParams = map[string]bool{
	// tracking and attribution
	"ref": true, "ref_src": true, "ref_url": true, "fbclid": true, "gclid": true, "dclid": true,
	"gbraid": true, "wbraid": true, "msclkid": true, "mc_cid": true, "mc_eid": true, "igshid": true,
	"yclid": true, "_ga": true, "_gl": true, "_gid": true, "spm": true, "si": true, "pf_rd_p": true, "pf_rd_r": true,
	"pd_rd_r": true, "pd_rd_w": true, "pd_rd_wg": true, "psc": true, "smid": true, "tag": true,
	"linkcode": true, "campaign": true, "trk": true, "source": true, "_hsenc": true, "_hsmi": true,
	"mkt_tok": true, "oly_anon_id": true, "oly_enc_id": true, "vero_id": true, "wickedid": true,
	// per-visit query, search-result and click ids
	"qid": true, "sr": true, "crid": true, "sprefix": true, "ved": true, "ei": true, "clickid": true, "click_id": true,
	// session ids
	"sid": true, "sessionid": true, "session_id": true, "jsessionid": true, "phpsessid": true, "aspsessionid": true,
}

// trackingSegment matches tracking path segments such as Amazon's "/ref=sr_1_1".
var trackingSegment = LazyRE(`^ref=[^/]*$`)

// isVolatileParam reports whether a query key is dropped by normalization.
func isVolatileParam(k string) bool {
	k = strings.ToLower(k)
	return volatileParams[k] || strings.HasPrefix(k, "utm_")
}

// NormalizedURL is a URL reduced to what identifies the page.
type NormalizedURL struct {
	URL    string // canonical form: https://domain/path?sorted=query (scheme kept)
	Domain string // lower-case ASCII host without "www." and port
	Path   string // escaped path, no trailing slash except the root "/"
	Query  url.Values
}

// NormalizeURL canonicalizes raw: lower-case host, "www." stripped, IDNA to
// punycode, default port dropped, fragment, volatile parameters (tracking,
// session, query and click ids: volatileParams) and tracking path segments dropped, remaining query keys sorted. It is idempotent. A URL
// without a scheme is read as https.
func NormalizeURL(raw string) (NormalizedURL, error) {
	// Tabs and line breaks are removed, as browsers do: a URL never holds them.
	raw = strings.TrimSpace(stripTabsNewlines(raw))
	if raw == "" {
		return NormalizedURL{}, fmt.Errorf("%w: empty URL: give a full URL such as https://example.com/page", ErrBadURL)
	}
	if len(raw) > maxURL {
		return NormalizedURL{}, fmt.Errorf("%w: URL longer than %d bytes", ErrBadURL, maxURL)
	}
	if !hasScheme(raw) {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return NormalizedURL{}, fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return NormalizedURL{}, fmt.Errorf("%w: %q: scheme %q is not http or https", ErrBadURL, raw, u.Scheme)
	}
	domain, err := NormalizeDomain(u.Hostname())
	if err != nil {
		return NormalizedURL{}, fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	port := u.Port()
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return NormalizedURL{}, fmt.Errorf("%w: %q: port %s is not between 1 and 65535", ErrBadURL, raw, port)
		}
		port = strconv.Itoa(p) // "0080" and "80" are one port
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	host := domain
	if port != "" {
		host = domain + ":" + port // a domain never holds a colon: IPv6 hosts are refused
	}

	var segs []string
	for _, s := range strings.Split(u.EscapedPath(), "/") {
		if s == "" || s == "." || trackingSegment.MatchString(s) {
			continue
		}
		if s == ".." {
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			continue
		}
		segs = append(segs, s)
	}
	path := "/" + strings.Join(segs, "/")

	q := url.Values{}
	for k, vs := range u.Query() {
		if isVolatileParam(k) {
			continue
		}
		q[k] = vs
	}
	n := NormalizedURL{Domain: domain, Path: path, Query: q}
	n.URL = scheme + "://" + host + path
	if enc := q.Encode(); enc != "" {
		n.URL += "?" + enc
	}
	if len(n.URL) > maxURL { // escaping can grow a URL past the cap; refuse it here so normalizing is idempotent
		return NormalizedURL{}, fmt.Errorf("%w: URL longer than %d bytes once escaped", ErrBadURL, maxURL)
	}
	return n, nil
}

// stripTabsNewlines removes tabs, CR and LF (and NEL, U+2028, U+2029).
func stripTabsNewlines(s string) string {
	if !strings.ContainsAny(s, "\t\r\n\u0085\u2028\u2029") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\r', '\n', 0x85, 0x2028, 0x2029:
			return -1
		}
		return r
	}, s)
}

// numericHost reports a host whose last label is a number (decimal, or hex
// with 0x), which the URL standard parses as an IPv4 address.
func numericHost(host string) bool {
	labels := strings.Split(strings.ToLower(host), ".")
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		for _, c := range last {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// schemeRe matches a leading URL scheme; "host:8080/…" is a host and port, not a scheme.
var schemeRe = LazyRE(`^[A-Za-z][A-Za-z0-9+.-]*:([^0-9]|$)`)

// hasScheme reports whether raw starts with a scheme ("https://…", "mailto:…"),
// so that a scheme-less "example.com/x?next=https://…" reads as https and
// "mailto:a@example.com" is refused rather than read as a host.
func hasScheme(raw string) bool { return schemeRe.MatchString(raw) }

// NormalizeDomain lower-cases a host name, converts it to punycode (IDNA), and
// strips a leading "www.". The result is one safe path segment.
func NormalizeDomain(host string) (string, error) {
	host = strings.TrimRight(strings.TrimSpace(host), ".")
	if host == "" {
		return "", errors.New("the URL has no host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip = ip.Unmap(); !ip.Is4() {
			return "", errors.New("IPv6 hosts are not supported as knowledge domains")
		}
		return ip.String(), nil
	}
	if numericHost(host) {
		// A browser reads "0x7f.1" or "127.1" as an IPv4 address of its own
		// spelling; pem keys knowledge only on the dotted-quad form.
		return "", fmt.Errorf("host %q looks numeric but is not a dotted-quad IPv4 address: write the address as a.b.c.d", host)
	}
	a, err := idna.Lookup.ToASCII(strings.ToLower(host))
	if err != nil {
		return "", fmt.Errorf("host %q is not a valid domain name: %v", host, err)
	}
	for strings.HasPrefix(a, "www.") { // a loop, so that normalizing is idempotent
		a = a[len("www."):]
	}
	if a == "" || len(a) > 253 || strings.ContainsAny(a, "/\\:") || strings.Contains(a, "..") || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".") {
		return "", fmt.Errorf("host %q is not a valid domain name", host)
	}
	return a, nil
}

// idSegment matches a path segment that names one item rather than a kind of
// page: numbers, hashes, UUIDs, product codes like B0012345, and slugs that
// end in a number.
var (
	digitsRe = LazyRE(`^\d+$`)
	hexRe    = LazyRE(`^[0-9a-fA-F]{7,}$`)
	uuidRe   = LazyRE(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	codeRe   = LazyRE(`^[A-Za-z0-9_-]*\d[A-Za-z0-9_-]*$`)
)

func isIDSegment(s string) bool {
	if digitsRe.MatchString(s) || uuidRe.MatchString(s) {
		return true
	}
	if hexRe.MatchString(s) && strings.ContainsAny(s, "0123456789") {
		return true
	}
	// A code mixing letters and at least three digits, such as B0012345 or
	// item-48213; "v2" or "h1" stay literal.
	if codeRe.MatchString(s) {
		n := 0
		for _, r := range s {
			if r >= '0' && r <= '9' {
				n++
			}
		}
		return n >= 3
	}
	return false
}

// Pattern turns a normalized URL into the pattern that knowledge is kept under:
// ID-like path segments become "*", query values become "*" with the keys kept
// (sorted), and the root stays "/". The pattern has no scheme or host.
func Pattern(n NormalizedURL) string {
	segs := splitPath(n.Path)
	for i, s := range segs {
		if isIDSegment(s) {
			segs[i] = "*"
		}
	}
	p := "/" + strings.Join(segs, "/")
	if len(n.Query) > 0 {
		keys := make([]string, 0, len(n.Query))
		for k := range n.Query {
			keys = append(keys, url.QueryEscape(k)+"=*")
		}
		sort.Strings(keys)
		p += "?" + strings.Join(keys, "&")
	}
	return p
}

func splitPath(p string) []string {
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return segs
}

// Specificity ranks how well a pattern matches a URL: more literal path segments
// first, then more pinned query keys. A zero Specificity with ok=false is no match.
type Specificity struct {
	Literals  int
	QueryKeys int
	Length    int
}

// Less reports whether s ranks below o.
func (s Specificity) Less(o Specificity) bool {
	if s.Literals != o.Literals {
		return s.Literals < o.Literals
	}
	if s.QueryKeys != o.QueryKeys {
		return s.QueryKeys < o.QueryKeys
	}
	return s.Length < o.Length
}

// MatchPattern reports whether pattern (as made by Pattern) covers n, and how
// specifically. Path segments must match one for one ("*" matches any one
// segment; a trailing "**" matches the rest); every query key of the pattern
// must be present in the URL (a literal value must be equal).
func MatchPattern(pattern string, n NormalizedURL) (Specificity, bool) {
	pp, pq, _ := strings.Cut(pattern, "?")
	psegs := splitPath(pp)
	usegs := splitPath(n.Path)
	var sp Specificity
	for i, ps := range psegs {
		if ps == "**" && i == len(psegs)-1 {
			sp.Length = len(psegs) - 1 // "**" ranks below a one-segment "*"
			goto query
		}
		if i >= len(usegs) {
			return Specificity{}, false
		}
		if ps == "*" {
			continue
		}
		if ps != usegs[i] {
			return Specificity{}, false
		}
		sp.Literals++
	}
	if len(usegs) != len(psegs) {
		return Specificity{}, false
	}
	sp.Length = len(psegs)
query:
	if pq != "" {
		for _, kv := range strings.Split(pq, "&") {
			k, v, _ := strings.Cut(kv, "=")
			k, _ = url.QueryUnescape(k)
			vals, ok := n.Query[k]
			if !ok {
				return Specificity{}, false
			}
			if v != "*" && v != "" {
				uv, _ := url.QueryUnescape(v)
				if len(vals) == 0 || vals[0] != uv {
					return Specificity{}, false
				}
				sp.Literals++
			}
			sp.QueryKeys++
		}
	}
	return sp, true
}

// CheckHost refuses a URL whose host cannot key knowledge: one with no dot
// other than localhost ("notaurl"). Traces are refused for it (Engine's
// validation), so a run is refused before it starts.
func CheckHost(n NormalizedURL, raw string) error {
	if !strings.Contains(n.Domain, ".") && n.Domain != "localhost" {
		return fmt.Errorf("URL %q has no host: give the page's full URL, such as https://example.com/page", raw)
	}
	return nil
}

package engine

import (
	"encoding/base64"
	"net/url"
	"sort"
	"strings"
	"unicode"
)

// This file is the one set of rules for secrets nobody declared: what the
// scrubber removes before anything is written (ScrubText, ScrubTrace,
// ScrubPatch, ScrubFacts) and what `pem check` reports in a tree
// (FindSecrets). Declared secrets and password fields are redact.go's.

// SecretKind names one shape of credential. It is what redactions and
// `pem check` report; never the value.
type SecretKind string

const (
	SecretPrivateKey   SecretKind = "private key"
	SecretAWSKeyID     SecretKind = "AWS access key id"
	SecretAWSSecret    SecretKind = "AWS secret access key"
	SecretGitHub       SecretKind = "GitHub token"
	SecretGitLab       SecretKind = "GitLab token"
	SecretSlack        SecretKind = "Slack token"
	SecretSlackHook    SecretKind = "Slack webhook"
	SecretGoogle       SecretKind = "Google API key"
	SecretStripe       SecretKind = "Stripe key"
	SecretAPIKey       SecretKind = "API secret key (sk-…)"
	SecretPackageToken SecretKind = "package registry token"
	SecretJWT          SecretKind = "JSON web token"
	SecretAuthHeader   SecretKind = "Authorization header"
	SecretBearer       SecretKind = "Bearer credential"
	SecretBasic        SecretKind = "Basic credential"
	SecretCookie       SecretKind = "cookie"
	SecretURLUserinfo  SecretKind = "credential in a URL (userinfo)"
	SecretParam        SecretKind = "credential parameter"
	SecretServiceToken SecretKind = "service token"
	SecretCommandLine  SecretKind = "credential on a command line"
	SecretProse        SecretKind = "password in text"
)

// SecretHit is one secret found in a text: its kind and the byte span
// [Offset, End) of the value (what the scrubber replaces).
type SecretHit struct {
	Kind   SecretKind
	Offset int
	End    int
}

type secretRule struct {
	kind SecretKind
	re   *LazyRegexp
	// group is the submatch holding the value (0: the whole match).
	group int
	// triggers: lower-case literals of which one must occur for the rule to
	// run at all (most text holds none, and then costs a few Contains).
	triggers []string
	// valid, when set, must accept the value.
	valid func(v string) bool
	// unless, when set, is a submatch that drops the hit when it matched
	// (what follows the value says it is no credential).
	unless int
	// pre, when set, must accept the text before the rule's expression runs
	// at all: a cheap test where no literal of the rule is rare enough to be
	// its trigger (a rule with pre and no triggers is asked of every text).
	pre func(text string) bool
}

// credName is a parameter or key name that holds a credential. Compound
// names ending in a strong word (access_token, x-api-key, client_secret,
// x-amz-signature) count; the weak short words (key, sid, auth, session,
// pass, pin, otp) only on their own, and only as name=value.
const (
	credNameStrong = `(?:[a-z0-9_.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|signature|credentials?|session[_-]?id|sessid|jsessionid|phpsessid|jwt|code[_-]?verifier))`
	credName       = `(?:` + credNameStrong + `|key|sid|auth|session|sig|pass|pw|pin|otp)`
)

var secretRules = []secretRule{
	{kind: SecretPrivateKey, triggers: []string{"private key"},
		re: LazyRE(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)`)},
	{kind: SecretAWSKeyID, triggers: []string{"akia", "asia", "abia", "acca"},
		re: LazyRE(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`)},
	{kind: SecretAWSSecret, triggers: []string{"secret"}, group: 1,
		re: LazyRE(`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})`)},
	// The secret beside its key id, as a key pair is pasted or typed
	// ("AKIA… wJalr…", "id:secret", a CSV row): 40 characters of its
	// alphabet right after the id, whatever names them.
	{kind: SecretAWSSecret, triggers: []string{"akia", "asia", "abia", "acca"}, group: 1, valid: tokenLike,
		re: LazyRE(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}["']?[\s,;:|=/]{1,8}["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)`)},
	{kind: SecretGitHub, triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re: LazyRE(`\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b`)},
	{kind: SecretGitLab, triggers: []string{"glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glft-", "glimt-", "glsoat-"},
		re: LazyRE(`\bgl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|soat)-[A-Za-z0-9_\-]{20,}`)},
	{kind: SecretSlack, triggers: []string{"xox"},
		re: LazyRE(`\bxox[abposre]-[A-Za-z0-9-]{10,}`)},
	{kind: SecretSlackHook, triggers: []string{"hooks.slack.com"},
		re: LazyRE(`(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+`)},
	{kind: SecretGoogle, triggers: []string{"aiza"},
		re: LazyRE(`\bAIza[0-9A-Za-z_\-]{35}`)},
	{kind: SecretStripe, triggers: []string{"sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"},
		re: LazyRE(`\b(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[A-Za-z0-9]{24,})`)},
	{kind: SecretAPIKey, triggers: []string{"sk-"},
		re: LazyRE(`\bsk-(?:ant-(?:api03-|admin01-)?|proj-|live-|svcacct-|admin-)?[A-Za-z0-9_\-]{24,}`)},
	{kind: SecretPackageToken, triggers: []string{"npm_", "hf_", "sg.", "pypi-", "_v1_", "shpat_", "shpss_", "shpca_", "shppa_"},
		re: LazyRE(`\b(?:npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|pypi-AgE[A-Za-z0-9_\-]{50,}|do[por]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})\b`)},
	{kind: SecretPackageToken, triggers: []string{"xapp-", "sq0", "dapi", "hvs.", "dp.pt.", "lin_api_", "figd_", "glsa_", "atatt3", "key-"},
		re: LazyRE(`\b(?:xapp-\d-[A-Za-z0-9-]{10,}|sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}|dapi[a-f0-9]{32}|hvs\.[A-Za-z0-9_\-]{24,}|dp\.pt\.[A-Za-z0-9]{40,}|lin_api_[A-Za-z0-9]{40}|figd_[A-Za-z0-9_\-]{40,}|glsa_[A-Za-z0-9_]{32,}|ATATT3[A-Za-z0-9_\-=]{50,}|key-[a-f0-9]{32})\b`)},
	{kind: SecretJWT, triggers: []string{"eyj"},
		re: LazyRE(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}`)},
	// Headers: the whole value, scheme included, to the end of the line.
	{kind: SecretAuthHeader, triggers: []string{"authorization"}, group: 1, valid: credentialValue,
		re: LazyRE(`(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?([^\r\n"'<>]+)`)},
	{kind: SecretCookie, triggers: []string{"cookie"}, group: 1,
		re: LazyRE(`(?i)\b(?:set-)?cookies?["']?\s*[:=]\s*["']?([^\s=;:"',]+=[^\r\n"']*)`)},
	{kind: SecretBearer, triggers: []string{"bearer"}, group: 1, valid: tokenLike,
		re: LazyRE(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{12,}=*)`)},
	{kind: SecretBearer, triggers: []string{"token"}, group: 1, valid: tokenLike,
		re: LazyRE(`(?i)\btoken\s+([A-Za-z0-9\-._~+/]{20,}=*)`)},
	{kind: SecretBasic, triggers: []string{"basic"}, group: 1, valid: basicCredential,
		re: LazyRE(`(?i)\bbasic\s+([A-Za-z0-9+/]{6,}={0,2})`)},
	{kind: SecretURLUserinfo, triggers: []string{"://"}, group: 1, valid: credentialValue,
		re: LazyRE(`[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#\s@"'<>\\]+)@`)},
	// name=value in a query, a form body or free text.
	{kind: SecretParam, triggers: credTriggers, group: 1, valid: credentialValue,
		re: LazyRE(`(?i)(?:^|[?&;#/\s"'{,(\[])` + credName + `=([^&\s"'#;<>]*)`)},
	// name: value in JSON, YAML and headers (X-Api-Key: …); strong names
	// only, since "session: s1" is pem's own field.
	{kind: SecretParam, triggers: credTriggers, group: 1, valid: credentialValue,
		re: LazyRE(`(?i)(?:^|[\s"'{,(\[;])["']?` + credNameStrong + `["']?\s*:\s*["']?([^\s"',;{}\[\]<>]{3,})`)},
	// Tokens of services whose dashboards show them once, as an agent
	// creating a key reads it off the page: Docker Hub, Supabase, Groq,
	// Replicate, Notion, PlanetScale, Pulumi, Sentry, New Relic, Heroku,
	// Google OAuth (client secret, access token), Bitbucket, age, Airtable,
	// Fly.io, Terraform Cloud, Square, Firebase, Dropbox.
	{kind: SecretServiceToken, group: 1,
		triggers: []string{"dckr_pat_", "sbp_", "gsk_", "r8_", "ntn_", "secret_", "pscale_", "pul-", "sntry", "nrak-",
			"hrku-", "gocspx-", "ya29.", "atbb", "age-secret-key-", "fo1_", "fm1_", "fm2_", ".atlasv1.", "eaaa", "apa91b", "sl."},
		re: LazyRE(`(?:^|[^A-Za-z0-9_\-])(` +
			`dckr_pat_[A-Za-z0-9_\-]{27,}|sbp_[a-f0-9]{40}|gsk_[A-Za-z0-9]{48,}|r8_[A-Za-z0-9]{37}|ntn_[A-Za-z0-9]{40,}|` +
			`secret_[A-Za-z0-9]{43}|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.\-]{32,}|pul-[a-f0-9]{40}|sntry[su]_[A-Za-z0-9_+/=]{40,}|` +
			`NRAK-[A-Z0-9]{27}|HRKU-[A-Za-z0-9_\-]{20,}|GOCSPX-[A-Za-z0-9_\-]{24,}|ya29\.[A-Za-z0-9_\-]{30,}|` +
			`ATBB[A-Za-z0-9_=.\-]{28,}|AGE-SECRET-KEY-1[0-9A-Z]{50,}|` +
			`fo1_[A-Za-z0-9_\-]{40,}|fm[12]_[A-Za-z0-9+/=_\-]{40,}|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,}|` +
			`EAAA[A-Za-z0-9_\-]{60,}|AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,}|sl\.[A-Za-z0-9_\-]{90,})`)},
	// Airtable's personal access tokens ("pat" opens many words: its own
	// rule, so the one above does not run for every "path").
	{kind: SecretServiceToken, triggers: []string{"pat"}, group: 1, pre: func(t string) bool { return strings.Contains(t, ".") },
		re: LazyRE(`(?:^|[^A-Za-z0-9_\-])(pat[A-Za-z0-9]{14}\.[a-f0-9]{64})`)},
	// Tokens whose shape has no distinct prefix: Twilio API key secrets
	// (SK and 32 hex digits), Mailchimp keys (32 hex digits, -us and the
	// data centre), Telegram bot tokens (the bot's id, a colon, 35
	// characters from AA), Discord bot tokens (three base64url parts). Their
	// literals are case-sensitive ("SK", ":AA"), or a shape (".xxxxxx."):
	// pre tests them, not the case-folded triggers of every "task".
	{kind: SecretServiceToken, triggers: []string{"sk", "-us", ":aa"}, group: 1,
		pre: func(t string) bool {
			return strings.Contains(t, "SK") || strings.Contains(t, "-us") || strings.Contains(t, ":AA")
		},
		re: LazyRE(`(?:^|[^A-Za-z0-9_\-])(SK[0-9a-fA-F]{32}|[0-9a-f]{32}-us[0-9]{1,2}|[0-9]{6,12}:AA[A-Za-z0-9_\-]{30,40})(?:[^A-Za-z0-9_\-]|\z)`)},
	{kind: SecretServiceToken, group: 1, valid: discordToken, pre: dottedSix,
		re: LazyRE(`(?:^|[^A-Za-z0-9_\-.])([MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40})(?:[^A-Za-z0-9_\-.]|\z)`)},
	// A PuTTY key file's private lines.
	{kind: SecretPrivateKey, triggers: []string{"private-lines:"}, group: 1,
		re: LazyRE(`(?i)Private-Lines:[ \t]*\d+[ \t]*\r?\n((?:[A-Za-z0-9+/=]+(?:\r?\n|\z))+)`)},
	// Credentials given to a command: --password VALUE (the = form is a
	// parameter above), curl -u user:password, and -p PASSWORD of the
	// clients whose -p is one (mysql, mariadb, sshpass, docker login …).
	{kind: SecretCommandLine, triggers: []string{"--"}, group: 1, valid: credentialValue,
		re: LazyRE(`(?i)(?:^|\s)--(?:password|passwd|pass|token|api-?key|secret|auth-token|access-token|http-password|proxy-password|client-secret)\s+["']?([^\s"']+)`)},
	{kind: SecretCommandLine, triggers: []string{"curl"}, group: 1,
		re: LazyRE(`(?i)\bcurl\b[^\n]*?\s(?:-u|--user|--proxy-user)(?:\s+|=)?["']?([^\s"':]*:[^\s"']+)`)},
	{kind: SecretCommandLine, triggers: []string{"mysql", "mariadb", "sshpass", "login"}, group: 1, valid: credentialValue,
		re: LazyRE(`(?i)\b(?:mysql\w*|mariadb\w*|sshpass|(?:docker|podman|buildah|helm|oras|skopeo|nerdctl)\b[^\n]*?\blogin)\b[^\n]*?\s-p[ \t]*["']?([^\s"'\-][^\s"']*)`)},
	// A password told in words: "the password is hunter2", "login alice
	// password s3cret1" (.netrc), "with password Tr0ub4dor&3". Only a value
	// with a digit or a symbol ("password reset", "password is required"
	// are not), and not a length ("password is 8-64 characters").
	{kind: SecretProse, triggers: []string{"pass", "pwd"}, group: 1, valid: proseCredential, unless: 2,
		re: LazyRE(`(?i)\b(?:password|passwd|passphrase|passcode|pwd)\s+(?:is\s+|was\s+)?["'\x{201C}\x{2018}]?([^\s"'<>\x{201D}\x{2019}]{3,})` +
			`(\s+(?:characters?|chars|digits?|letters?|symbols?|bytes|words|long|or\s+(?:more|longer|fewer)))?`)},
}

var placeholderRe = LazyRE(`\{\{(?:secret:[^{}]*|redacted)\}\}`)

var credKeyRe = LazyRE(`(?i)^` + credName + `$`)

// credentialKey reports whether a field name says its value is a credential.
func credentialKey(name string) bool { return credKeyRe.MatchString(strings.TrimSpace(name)) }

var credTriggers = []string{"pass", "pwd", "secret", "token", "key", "sig", "sid", "sess", "auth", "credential", "jwt", "pin", "otp", "code"}

// FindSecrets reports the credentials in text that nobody declared, by the
// rules above, in order of offset; overlapping hits are merged into the
// first. pem's placeholders ({{secret:NAME}}, {{redacted}}) and the usual
// stand-ins (xxxx, ****, changeme, $VAR) are not secrets.
//
// Percent-encoded text (a credential inside a query value, a redirect URL,
// a form body) is read decoded too, twice over, and its hits mapped back to
// the bytes of text.
func FindSecrets(text string) []SecretHit {
	if len(text) < 8 {
		return nil
	}
	hits := findSecrets(text)
	cur, offs := text, []int(nil)
	for range 2 {
		if !strings.Contains(cur, "%") {
			break
		}
		dec, o := pctDecode(cur)
		if offs != nil { // compose with the previous level's map
			for i := range o {
				o[i] = offs[o[i]]
			}
		}
		cur, offs = dec, o
		for _, h := range findSecrets(cur) {
			hits = append(hits, SecretHit{Kind: h.Kind, Offset: offs[h.Offset], End: offs[h.End]})
		}
	}
	return mergeHits(hits)
}

// pctDecode decodes %XX escapes and '+' (a space in a query) and returns,
// for each byte of the result and one past its end, the offset in s it came
// from.
func pctDecode(s string) (string, []int) {
	var b strings.Builder
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			offs = append(offs, i)
			i += 3
			continue
		}
		if c == '+' {
			c = ' '
		}
		b.WriteByte(c)
		offs = append(offs, i)
		i++
	}
	offs = append(offs, len(s))
	return b.String(), offs
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func findSecrets(text string) []SecretHit {
	if strings.Contains(text, "{{") {
		// pem's placeholders are no secrets, and neither is their NAME:
		// masked (same length, so offsets hold) with stars, a stand-in.
		text = placeholderRe.ReplaceAllStringFunc(text, func(m string) string { return strings.Repeat("*", len(m)) })
	}
	on := triggered(text) // rules with pre and no triggers run on every text, if pre says so
	var hits []SecretHit
	for i := range secretRules {
		r := &secretRules[i]
		if on&(1<<i) == 0 && (len(r.triggers) > 0 || r.pre == nil) || r.pre != nil && !r.pre(text) {
			continue
		}
		for _, m := range r.re.FindAllStringSubmatchIndex(text, -1) {
			lo, hi := m[0], m[1]
			if r.group > 0 {
				if m[2*r.group] < 0 {
					continue
				}
				lo, hi = m[2*r.group], m[2*r.group+1]
			}
			v := text[lo:hi]
			if v == "" || harmlessSecret(v) || strings.HasSuffix(text[:lo], "{{") {
				continue
			}
			if r.valid != nil && !r.valid(v) || r.unless > 0 && m[2*r.unless] >= 0 {
				continue
			}
			hits = append(hits, SecretHit{Kind: r.kind, Offset: lo, End: hi})
		}
	}
	return hits
}

// mergeHits sorts hits by offset and merges overlapping ones into the first.
func mergeHits(hits []SecretHit) []SecretHit {
	if len(hits) < 2 {
		return hits
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Offset != hits[j].Offset {
			return hits[i].Offset < hits[j].Offset
		}
		return hits[i].End > hits[j].End
	})
	out := hits[:1]
	for _, h := range hits[1:] {
		last := &out[len(out)-1]
		if h.Offset < last.End {
			last.End = max(last.End, h.End)
			continue
		}
		out = append(out, h)
	}
	return out
}

// ScrubText replaces every secret FindSecrets reports with Redacted and
// returns the kinds it removed (in order, each once).
func ScrubText(s string) (string, []SecretKind) {
	return scrubHits(s, FindSecrets(s))
}

// scrubHits is ScrubText with the hits FindSecrets(s) returned.
func scrubHits(s string, hits []SecretHit) (string, []SecretKind) {
	if len(hits) == 0 {
		return s, nil
	}
	var b strings.Builder
	var kinds []SecretKind
	prev := 0
	for _, h := range hits {
		b.WriteString(s[prev:h.Offset])
		b.WriteString(Redacted)
		prev = h.End
		dup := false
		for _, k := range kinds {
			dup = dup || k == h.Kind
		}
		if !dup {
			kinds = append(kinds, h.Kind)
		}
	}
	b.WriteString(s[prev:])
	return b.String(), kinds
}

// The rules' triggers, indexed by their first two bytes, so that one pass
// over a text tells which rules can match (most texts: none).
var (
	trigPairs  [1 << 16]bool
	trigByPair = map[uint16][]trigRef{}
)

type trigRef struct {
	lit  string
	rule int
}

func init() {
	if len(secretRules) > 64 {
		panic("engine: more than 64 secret rules")
	}
	for i, r := range secretRules {
		for _, t := range r.triggers {
			k := uint16(t[0])<<8 | uint16(t[1])
			trigPairs[k] = true
			trigByPair[k] = append(trigByPair[k], trigRef{t, i})
		}
	}
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// triggered returns the set of rules (bit i: secretRules[i]) one of whose
// triggers occurs in text, ASCII case folded.
func triggered(text string) uint64 {
	var on uint64
	for i := 0; i+1 < len(text); i++ {
		k := uint16(lowerASCII(text[i]))<<8 | uint16(lowerASCII(text[i+1]))
		if !trigPairs[k] {
			continue
		}
		for _, t := range trigByPair[k] {
			if on&(1<<t.rule) == 0 && len(text)-i >= len(t.lit) && strings.EqualFold(text[i:i+len(t.lit)], t.lit) {
				on |= 1 << t.rule
			}
		}
	}
	return on
}

// harmlessSecret reports a value that is no secret: pem's placeholders,
// references to one ($VAR, ${VAR}, %s) and the usual stand-ins.
func harmlessSecret(v string) bool {
	t := strings.Trim(v, "\"' \t")
	if u, err := url.QueryUnescape(t); err == nil && u != t {
		t = u
	}
	l := strings.ToLower(t)
	switch l {
	case "", "null", "none", "nil", "true", "false", "yes", "no", "redacted", "xxxx", "****", "changeme",
		"example", "<redacted>", "[redacted]", "undefined", "hidden", "masked",
		// the words of documentation ("key=value", "token=string")
		"value", "values", "string", "str", "foo", "bar", "baz", "test", "demo", "sample", "placeholder",
		"secret", "password", "token", "key", "your_token", "your_key", "your_password", "mytoken", "mypassword":
		return true
	}
	if strings.HasPrefix(t, "{{") || strings.HasPrefix(t, "$") || strings.HasPrefix(t, "%") ||
		strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">") {
		return true
	}
	return strings.Trim(l, "*x•.·-_ ") == ""
}

// credentialStopwords are what a page says after "Password:" or
// "Authorization:" that is not a credential.
var credentialStopwords = map[string]bool{
	"required": true, "missing": true, "invalid": true, "incorrect": true, "wrong": true, "failed": true,
	"denied": true, "expired": true, "needed": true, "must": true, "should": true, "is": true, "the": true,
	"your": true, "enter": true, "forgot": true, "reset": true, "field": true, "empty": true, "minimum": true,
	"at": true, "not": true, "please": true, "header": true, "none": true, "optional": true, "change": true,
	"show": true, "hide": true, "strength": true, "length": true, "type": true, "new": true, "confirm": true,
	"current": true, "old": true, "this": true, "a": true, "an": true, "and": true, "or": true, "set": true,
}

// credentialValue accepts a value of a credential-named field unless it is
// short (under 3 bytes) or a word a page says there instead.
func credentialValue(v string) bool {
	t := strings.TrimSpace(v)
	if len(t) < 3 {
		return false
	}
	first, _, _ := strings.Cut(strings.ToLower(t), " ")
	return !credentialStopwords[strings.TrimRight(first, ".,;:!")]
}

// dottedSix reports whether text has six base64url characters between two
// dots, the middle part of a Discord bot token.
func dottedSix(text string) bool {
	for i := strings.IndexByte(text, '.'); i >= 0 && i+7 < len(text); {
		if text[i+7] == '.' {
			ok := true
			for _, c := range []byte(text[i+1 : i+7]) {
				ok = ok && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-')
			}
			if ok {
				return true
			}
		}
		j := strings.IndexByte(text[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// discordToken accepts three base64url parts whose first is a numeric id
// encoded, as a Discord bot token's is (not a dotted name of three words).
func discordToken(v string) bool {
	id, _, _ := strings.Cut(v, ".")
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(id, "="))
	if err != nil || len(b) < 15 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// proseCredential accepts a word after "password" that reads as one: a
// digit or a symbol in it, and not a word a page says there instead.
func proseCredential(v string) bool {
	t := strings.TrimRight(v, ".,;:!?)")
	if len(t) < 3 || strings.ContainsAny(t[:1], "([{*&") || !credentialValue(t) {
		return false
	}
	// Words joined by slashes are prose too ("password and/or salt").
	words := true
	for w := range strings.SplitSeq(t, "/") {
		words = words && len(w) >= 2 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
	}
	if words {
		return false
	}
	if len(t) < 6 && strings.IndexFunc(t, unicode.IsLetter) < 0 {
		return false // a number or a range ("8-64", "12+"), not a password
	}
	for _, r := range t {
		if unicode.IsDigit(r) || !unicode.IsLetter(r) && r != '-' {
			return true
		}
	}
	return false
}

// tokenLike accepts an opaque token: letters and digits mixed, or long.
func tokenLike(v string) bool {
	var letter, digit bool
	for _, r := range v {
		letter = letter || unicode.IsLetter(r)
		digit = digit || unicode.IsDigit(r)
	}
	return letter && (digit || len(v) >= 32)
}

// basicCredential accepts base64 that decodes to printable "user:password".
func basicCredential(v string) bool {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "=")); err != nil {
			return false
		}
	}
	if len(b) < 3 || !strings.Contains(string(b), ":") {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

package engine_test

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

// canary is one fake secret of one kind: text holding it as it would occur
// in a run, and the part that must never be stored. Every canary is
// assembled at run time, so the repository itself holds no string of any
// token format (secret scanners must not fire on it); each is obviously
// fake (F4KE).
type canary struct {
	kind  engine.SecretKind
	text  string
	value string
}

func canaries() []canary {
	r := strings.Repeat
	gh := "gh" + "p_" + r("F4KE", 9)
	pat := "github" + "_pat_" + r("F4KE0", 10)
	gl := "gl" + "pat-" + r("F4KE", 5)
	sl := "xo" + "xb-" + "1234567890-" + r("F4KE", 3)
	aws := "AK" + "IA" + r("F4KE", 4)
	awsSecret := r("F4kE/0+x", 5)
	goog := "AI" + "za" + r("F4KE", 8) + "F4K"
	stripe := "sk" + "_live_" + r("F4KE", 6)
	skp := "sk-" + "proj-" + r("F4KE", 7)
	jwt := "ey" + "JhbGciOiJIUzI1NiJ9." + "ey" + "JzdWIiOiJmYWtlIn0.F4KEsignatureF4KE"
	key := "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIF4KEF4KEprivate\n-----END RSA PRIVATE KEY-----"
	basic := base64.StdEncoding.EncodeToString([]byte("fakeuser:F4KEbasicpw"))
	dckr := "dckr" + "_pat_" + r("F4KE", 7)
	discord := base64.RawURLEncoding.EncodeToString([]byte("123456789012345678")) + ".F4KEf4." + r("F4KE", 8)
	return []canary{
		{engine.SecretGitHub, "push failed for token " + gh + " (scope repo)", gh},
		{engine.SecretGitHub, "env GITHUB=" + pat, pat},
		{engine.SecretGitLab, "x " + gl + " y", gl},
		{engine.SecretSlack, "slack " + sl, sl},
		{engine.SecretAWSKeyID, "aws " + aws + " us-east-1", aws},
		{engine.SecretAWSSecret, "aws_secret_access_key = " + awsSecret, awsSecret},
		{engine.SecretAWSSecret, "keys: " + aws + " " + awsSecret + " (rotate)", awsSecret},
		{engine.SecretAWSSecret, aws + "," + awsSecret + "\n", awsSecret},
		{engine.SecretGoogle, "maps " + goog, goog},
		{engine.SecretStripe, "stripe " + stripe, stripe},
		{engine.SecretAPIKey, "openai " + skp, skp},
		{engine.SecretJWT, "jwt " + jwt + " end", jwt},
		{engine.SecretPrivateKey, "key:\n" + key + "\nafter", "MIIF4KEF4KEprivate"},
		{engine.SecretAuthHeader, "request had Authorization: Bearer F4KEb3arer0123456789", "F4KEb3arer0123456789"},
		{engine.SecretBearer, "401 with bearer F4KEtok3nbearer98765", "F4KEtok3nbearer98765"},
		{engine.SecretAuthHeader, "Proxy-Authorization: Basic " + basic, basic},
		{engine.SecretBasic, "sent basic " + basic, basic},
		{engine.SecretCookie, "Cookie: theme=dark; sessionid=F4KEc00kie123", "F4KEc00kie123"},
		{engine.SecretCookie, "Set-Cookie: auth=F4KEsetc00kie; Path=/; HttpOnly", "F4KEsetc00kie"},
		{engine.SecretURLUserinfo, "open https://fakeuser:F4KEurlpw@example.com/login", "F4KEurlpw"},
		{engine.SecretParam, "https://example.com/api?x=1&api_key=F4KEqueryk3y", "F4KEqueryk3y"},
		{engine.SecretParam, "posted user=a&password=F4KEformpw&x=1", "F4KEformpw"},
		{engine.SecretParam, "#access_token=F4KEacc3ss&state=1", "F4KEacc3ss"},
		{engine.SecretParam, `{"client_secret": "F4KEcl1entsecret"}`, "F4KEcl1entsecret"},
		{engine.SecretParam, "X-Api-Key: F4KEhdrk3y", "F4KEhdrk3y"},
		{engine.SecretParam, "?sid=F4KEs1d&sig=F4KEs1g", "F4KEs1g"},
		{engine.SecretParam, `{"accessToken": "F4KEcamel7"}`, "F4KEcamel7"},
		{engine.SecretParam, "DefaultEndpointsProtocol=https;AccountKey=F4KEazure9==;", "F4KEazure9"},
		{engine.SecretCookie, `"cookies": "sid=F4KEjsoncookie"`, "F4KEjsoncookie"},
		{engine.SecretParam, "https://example.com/?next=%2Flogin%3Fpassword%3DF4KEenc0ded%26x%3D1", "F4KEenc0ded"},
		{engine.SecretAuthHeader, "h=Authorization%253A%2520Bearer%2520F4KEtwice0123456", "F4KEtwice0123456"},
		// Session 12's probe: formats and phrasings no earlier rule had.
		{engine.SecretParam, "Password: F4KE&tail9", "&tail9"},
		{engine.SecretServiceToken, "docker login -u me --password-stdin <<< " + dckr, dckr},
		{engine.SecretServiceToken, "SUPABASE_ACCESS_TOKEN " + "sb" + "p_" + r("f4ce", 10), "sb" + "p_" + r("f4ce", 10)},
		{engine.SecretServiceToken, "key " + "gs" + "k_" + r("F4KE", 13) + " created", "gs" + "k_" + r("F4KE", 13)},
		{engine.SecretServiceToken, "your token: " + "r8" + "_" + r("F4KE", 9) + "F", "r8" + "_" + r("F4KE", 9) + "F"},
		{engine.SecretServiceToken, "integration " + "nt" + "n_" + r("F4KE", 11), "nt" + "n_" + r("F4KE", 11)},
		{engine.SecretServiceToken, "pscale" + "_tkn_" + r("F4KE", 9), "pscale" + "_tkn_" + r("F4KE", 9)},
		{engine.SecretServiceToken, "PULUMI " + "pu" + "l-" + r("f4ce", 10), "pu" + "l-" + r("f4ce", 10)},
		{engine.SecretServiceToken, "sntry" + "s_" + r("F4KE", 11), "sntry" + "s_" + r("F4KE", 11)},
		{engine.SecretServiceToken, "NR" + "AK-" + r("F4KE", 6) + "F4K" + " (user key)", "NR" + "AK-" + r("F4KE", 6) + "F4K"},
		{engine.SecretServiceToken, "HR" + "KU-" + r("F4KE", 6), "HR" + "KU-" + r("F4KE", 6)},
		{engine.SecretServiceToken, "Client secret GOC" + "SPX-" + r("F4KE", 7), "GOC" + "SPX-" + r("F4KE", 7)},
		{engine.SecretServiceToken, "access ya" + "29." + r("F4KE", 9), "ya" + "29." + r("F4KE", 9)},
		{engine.SecretServiceToken, "app password AT" + "BB" + r("F4KE", 8), "AT" + "BB" + r("F4KE", 8)},
		{engine.SecretServiceToken, "AGE-SECRET" + "-KEY-1" + r("F4KE", 14), "AGE-SECRET" + "-KEY-1" + r("F4KE", 14)},
		{engine.SecretServiceToken, "pa" + "t" + r("F4KE", 3) + "F4." + r("f4ce", 16), "." + r("f4ce", 16)},
		{engine.SecretServiceToken, "FlyV1 fm" + "2_" + r("F4KE", 11), "fm" + "2_" + r("F4KE", 11)},
		{engine.SecretServiceToken, r("F4KE", 3) + "F4.atlas" + "v1." + r("F4KE", 16), "v1." + r("F4KE", 16)},
		{engine.SecretServiceToken, "EA" + "AA" + r("F4KE", 16), "EA" + "AA" + r("F4KE", 16)},
		{engine.SecretServiceToken, "AA" + "AAF4KEf4k:APA" + "91b" + r("F4KE", 26), "91b" + r("F4KE", 26)},
		{engine.SecretServiceToken, "sl" + "." + r("F4KE", 25), "sl" + "." + r("F4KE", 25)},
		{engine.SecretServiceToken, "api key S" + "K" + r("f4ce", 8) + " secret", "S" + "K" + r("f4ce", 8)},
		{engine.SecretServiceToken, "key " + r("f4ce", 8) + "-us" + "12", r("f4ce", 8) + "-us" + "12"},
		{engine.SecretServiceToken, "bot 110201543" + ":AA" + r("F4KE", 8) + " ready", ":AA" + r("F4KE", 8)},
		{engine.SecretServiceToken, "bot " + discord, discord},
		{engine.SecretPrivateKey, "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\nAAAAF4KEputty" + r("F4KE", 6) + "\nPrivate-MAC: 00", "AAAAF4KEputty"},
		{engine.SecretCommandLine, "curl -u fakeuser:F4KEcurlpw https://api.example.com", "F4KEcurlpw"},
		{engine.SecretCommandLine, "mysql -u root -pF4KEmysql9 app", "F4KEmysql9"},
		{engine.SecretCommandLine, "sshpass -p 'F4KEsshp4ss' ssh root@host", "F4KEsshp4ss"},
		{engine.SecretCommandLine, "docker login -u me -p F4KEd0cker registry.example.com", "F4KEd0cker"},
		{engine.SecretCommandLine, "wget --password F4KEwg3t https://example.com/f", "F4KEwg3t"},
		{engine.SecretProse, "log in as alice with password F4KEpr0se and open the invoice", "F4KEpr0se"},
		{engine.SecretProse, "the admin password is F4KEis9.", "F4KEis9"},
		{engine.SecretProse, "machine api.example.com login alice password F4KEn3trc", "F4KEn3trc"},
	}
}

func TestFindSecretsEveryKind(t *testing.T) {
	for _, c := range canaries() {
		hits := engine.FindSecrets(c.text)
		if len(hits) == 0 {
			t.Errorf("%s: no hit in %q", c.kind, c.text)
			continue
		}
		out, kinds := engine.ScrubText(c.text)
		if strings.Contains(out, c.value) {
			t.Errorf("%s: scrubbed %q still holds the value", c.kind, out)
		}
		if !strings.Contains(out, engine.Redacted) || len(kinds) == 0 {
			t.Errorf("%s: scrubbed to %q, kinds %v", c.kind, out, kinds)
		}
		if again, k := engine.ScrubText(out); again != out || len(k) != 0 {
			t.Errorf("%s: scrubbing is not idempotent: %q → %q (%v)", c.kind, out, again, k)
		}
	}
}

func TestFindSecretsBenign(t *testing.T) {
	for _, s := range []string{
		"Password: required", "Enter your password", "password={{redacted}}", "token={{secret:GH}}",
		"Authorization: required", "basic authentication is disabled", "the bearer of bad news",
		"https://example.com/search?q=memory&page=2", "https://example.com/@octocat", "cookie banner dismissed",
		"input[name=password]", `a[href*="token="]`, "#login-password", "sort_key=name", "api_key=$API_KEY",
		"password=********", "https://example.com/?next=%7B%7Bredacted%7D%7D&token=%7B%7Bredacted%7D%7D",
		"The primary key of the table", "Token count: 12", "use `git push` to publish", "session expired",
		"go install example.com/acme/widgets@latest", "Use key=value pairs", "token=string in the docs",
		"mkdir -p build/dir", "docker run -p 8080:80 nginx", "ssh -p 2222 host", "mysql -u root -p",
		"The password is at least 8 characters", "password must contain 1 digit", "password (8+ characters)",
		"Forgot password? Reset it", "--token $GITHUB_TOKEN", "docker login --password-stdin", "curl -u $USER:$PASS https://example.com",
		"OperatingSystemNameVersion.prefix.SomethingLongerThanTwentySevenChars", "passing an empty password and/or salt",
		"func Open(password *uint16) error", "the secret_key_base setting", "asked the task list for SKU 12",
		"Your password is 8-64 characters long", "the password is 12 or more", "password 2024",
	} {
		if hits := engine.FindSecrets(s); len(hits) > 0 {
			t.Errorf("FindSecrets(%q) = %v, want none", s, hits)
		}
	}
}

// A secret found by its context in one field (the task's "with password …",
// a query's password=, an Authorization header) is removed where it stands
// alone too: typed into a field, echoed on a page, given as the answer.
func TestBuildTraceScrubsCopiesOfFoundSecrets(t *testing.T) {
	for _, c := range []struct{ task, url, errText, value string }{
		{task: "log in as alice with password F4KEpr0se and read the invoice total", value: "F4KEpr0se"},
		{task: "read the invoice total", url: "https://example.com/login?user=alice&password=F4KEqu3ry", value: "F4KEqu3ry"},
		{task: "read the invoice total", errText: "401 with Authorization: Bearer F4KEh3aderTok", value: "F4KEh3aderTok"},
		{task: "curl -u alice:F4KEcurlCopy https://example.com and report the total", value: "alice:F4KEcurlCopy"},
	} {
		in := &engine.TraceInput{
			Task: c.task, Answer: "total for " + c.value, ErrorMessage: c.errText,
			Steps: []engine.StepInput{
				{Action: "navigate", URL: cmp.Or(c.url, "https://example.com/login")},
				{Action: "type", Selector: "#login-field", Value: c.value},
				{Action: "get_text", Selector: "#out", Result: "welcome " + c.value},
				{Action: "navigate", URL: "https://example.com/next?u=" + url.QueryEscape(c.value)},
			},
		}
		e := engine.New(storetest.NewMemStore())
		tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/p", Trace: in, Intent: "copies"})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tr)
		if strings.Contains(string(b), c.value) || strings.Contains(string(b), url.QueryEscape(c.value)) {
			t.Errorf("%q: the value is still in the trace: %s", c.value, b)
		}
		if !slices.Contains(tr.Redactions, "steps[1].value: a copy of a secret") {
			t.Errorf("%q: redactions %v, want the typed copy listed", c.value, tr.Redactions)
		}
	}
}

// Every text field of a trace is scrubbed by BuildTrace (the one door of
// the CLI, MCP and the agent), step and final URLs included, and each
// redaction is listed by field, never with the value.
func TestBuildTraceScrubsEveryField(t *testing.T) {
	cs := canaries()
	for i, c := range cs {
		in := &engine.TraceInput{
			Task: "task " + c.text, Answer: c.text, FinalPageURL: "https://example.com/done?token=F4KEfinal#x",
			FinalPageTitle: c.text, ErrorMessage: c.text, Params: []string{c.text},
			ExtractionResults: map[string]any{"v": c.text, "api_key": "F4KEextrkey"},
			Steps: []engine.StepInput{
				{Action: "navigate", URL: "https://fakeuser:F4KEnav@example.com/a?password=F4KEnavpw\r\n"},
				{Action: "type", Selector: "#q", Value: c.text},
				{Action: "get_text", Selector: "#out", Result: c.text, Error: c.text},
				{Action: "click", Selector: `a[data-x="` + c.text + `"]`, Fallbacks: []string{c.text}},
			},
		}
		e := engine.New(storetest.NewMemStore())
		tr, err := e.BuildTrace(engine.SaveRequest{URL: "https://example.com/p", Trace: in, Intent: "scrub case"})
		if err != nil {
			t.Fatalf("%d %s: %v", i, c.kind, err)
		}
		b, _ := json.Marshal(tr)
		for _, v := range []string{c.value, "F4KEfinal", "F4KEextrkey", "F4KEnav", "F4KEnavpw"} {
			if strings.Contains(string(b), v) {
				t.Errorf("%d %s: trace still holds %q: %s", i, c.kind, v, b)
			}
		}
		if strings.ContainsAny(tr.Steps[0].URL, "\r\n") {
			t.Errorf("step URL keeps CR/LF: %q", tr.Steps[0].URL)
		}
		for _, want := range []string{"result.answer: ", "steps[2].result: ", "steps[0].url: ", "result.final_url: "} {
			found := false
			for _, r := range tr.Redactions {
				found = found || strings.HasPrefix(r, want)
			}
			if !found {
				t.Errorf("%d %s: no redaction for %q in %v", i, c.kind, want, tr.Redactions)
			}
		}
	}
}

func TestScrubPatchAndJSON(t *testing.T) {
	p := &engine.Patch{InteractionHints: []string{"log in with password=F4KEhintpw"},
		KnownBlockers: []engine.Blocker{{Type: "auth_required", Note: "Cookie: sid=F4KEblockc"}}}
	reds := engine.ScrubPatch(p)
	if len(reds) != 2 || strings.Contains(p.InteractionHints[0], "F4KE") || strings.Contains(p.KnownBlockers[0].Note, "F4KE") {
		t.Errorf("ScrubPatch: %v %+v", reds, p)
	}
	doc := []byte(`{"b": "Bearer F4KEjs0n0123456789", "a": ["ok"]}`)
	if out := engine.ScrubJSON(doc); strings.Contains(string(out), "F4KE") || !json.Valid(out) {
		t.Errorf("ScrubJSON = %s", out)
	}
	clean := []byte(`{"z": 1, "a": "plain"}`)
	if out := engine.ScrubJSON(clean); string(out) != string(clean) {
		t.Errorf("ScrubJSON changed a clean document: %s", out)
	}
}

func BenchmarkFindSecretsPlain(b *testing.B) {
	text := strings.Repeat("The repository has 1,234 stars and 56 forks. ", 90)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		engine.FindSecrets(text)
	}
}

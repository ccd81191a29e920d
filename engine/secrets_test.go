package engine_test

import (
	"encoding/base64"
	"encoding/json"
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
	} {
		if hits := engine.FindSecrets(s); len(hits) > 0 {
			t.Errorf("FindSecrets(%q) = %v, want none", s, hits)
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

package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// The scrubber applies FindSecrets to every text field of a record before it
// is written or shown. Redact (declared secrets, password fields) runs
// first and calls ScrubTrace last, so BuildTrace is the one place a saved
// trace is cleaned, whichever door it came in by (CLI, MCP, the agent).

// ScrubTrace normalizes the trace's step and final URLs (control characters
// removed, host and port checked; see CleanURL) and replaces every secret
// FindSecrets reports, in every text field, with Redacted, recording
// "<field>: <kind>" in t.Redactions (never the value). Then every copy of a
// value it removed is removed from every field too: a password read from
// the task ("with password hunter2") or a query (?password=…) is typed into
// a field or shown on a page without the words that mark it.
func ScrubTrace(t *Trace) {
	var found []string
	eachText(t, func(where string, s *string) {
		if strings.HasSuffix(where, ".url") || where == "result.final_url" {
			u, dropped := cleanURL(*s)
			if *s = u; dropped {
				t.addRedaction(where + ": " + string(SecretURLUserinfo))
			}
		}
		hits := FindSecrets(*s)
		for _, h := range hits {
			found = append(found, (*s)[h.Offset:h.End])
		}
		out, kinds := scrubHits(*s, hits)
		*s = out
		for _, k := range kinds {
			t.addRedaction(where + ": " + string(k))
		}
		// The value of a field named like a credential ("api_key").
		if name, ok := strings.CutPrefix(where, "result.extracted."); ok && credentialKey(name) && !harmlessSecret(*s) && *s != "" {
			found = append(found, *s)
			*s = Redacted
			t.addRedaction(where + ": " + string(SecretParam))
		}
	})
	scrubCopies(t, found)
}

// scrubCopies replaces in every text field of t each value of found (and
// its URL-escaped forms) with Redacted, longest first, recording
// "<field>: a copy of a secret". Values under 4 bytes are left: they would
// shred ordinary text.
func scrubCopies(t *Trace, found []string) {
	var forms []string
	for _, v := range found {
		v = strings.Trim(v, "\"' ")
		vs := []string{v}
		if i := strings.LastIndexByte(v, ' '); i >= 0 && len(v)-i > 8 {
			vs = append(vs, v[i+1:]) // the token of "Bearer <token>"
		}
		for _, v := range vs {
			if len(v) < 4 || harmlessSecret(v) || strings.Contains(v, Redacted) {
				continue
			}
			for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
				if !contains(forms, form) {
					forms = append(forms, form)
				}
			}
		}
	}
	if len(forms) == 0 {
		return
	}
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	eachText(t, func(where string, s *string) {
		for _, form := range forms {
			if strings.Contains(*s, form) {
				*s = strings.ReplaceAll(*s, form, Redacted)
				t.addRedaction(where + ": a copy of a secret")
			}
		}
	})
}

// eachText calls f with every text field of t that may hold a secret and
// its name, as ScrubTrace names them (result.extracted's keys and values
// included: the map is rebuilt with what f leaves).
func eachText(t *Trace, f func(where string, s *string)) {
	for i := range t.Steps {
		s := &t.Steps[i]
		p := fmt.Sprintf("steps[%d].", i)
		f(p+"selector", &s.Selector)
		for j := range s.Fallbacks {
			f(fmt.Sprintf("%sfallbacks[%d]", p, j), &s.Fallbacks[j])
		}
		for _, x := range []struct {
			name string
			s    *string
		}{{"value", &s.Value}, {"param", &s.Param}, {"url", &s.URL}, {"error", &s.Error}, {"error_kind", &s.ErrorKind}, {"result", &s.Result}} {
			f(p+x.name, x.s)
		}
	}
	for i := range t.Approvals {
		a := &t.Approvals[i]
		p := fmt.Sprintf("approvals[%d].", i)
		f(p+"selector", &a.Selector)
		f(p+"url", &a.URL)
		f(p+"rule", &a.Rule)
		f(p+"why", &a.Why)
		f(p+"note", &a.Note)
	}
	intent := t.Intent
	for _, x := range []struct {
		name string
		s    *string
	}{{"task", &t.Task}, {"intent", &t.Intent}, {"task_type", &t.TaskType}, {"session", &t.Session}, {"writer", &t.Writer},
		{"url", &t.URL}, {"url_pattern", &t.URLPattern}, {"error", &t.Error}} {
		f(x.name, x.s)
	}
	if t.Intent != intent {
		t.IntentKey = IntentKey(t.Intent)
	}
	for i := range t.Params {
		f(fmt.Sprintf("params[%d]", i), &t.Params[i])
	}
	f("result.answer", &t.Result.Answer)
	f("result.final_url", &t.Result.FinalURL)
	f("result.final_title", &t.Result.FinalTitle)
	if len(t.Result.Extracted) > 0 {
		ex := make(map[string]string, len(t.Result.Extracted))
		for _, k := range sortedKeys(t.Result.Extracted) {
			v, nk := t.Result.Extracted[k], k
			f("result.extracted key", &nk)
			f("result.extracted."+nk, &v)
			ex[nk] = v
		}
		t.Result.Extracted = ex
	}
}

// ScrubPatch scrubs every text field of a facts patch in place and returns
// the redactions ("<field>: <kind>").
func ScrubPatch(p *Patch) []string {
	if p == nil {
		return nil
	}
	var reds []string
	f := func(where string, s *string) {
		out, kinds := ScrubText(*s)
		*s = out
		for _, k := range kinds {
			reds = append(reds, where+": "+string(k))
		}
	}
	if len(p.Selectors) > 0 {
		sels := make(map[string]Selector, len(p.Selectors))
		for _, n := range sortedKeys(p.Selectors) {
			sel, nn := p.Selectors[n], n
			f("selectors key", &nn)
			sel.Fallbacks = append([]string(nil), sel.Fallbacks...)
			f("selectors."+nn+".primary", &sel.Primary)
			for i := range sel.Fallbacks {
				f(fmt.Sprintf("selectors.%s.fallbacks[%d]", nn, i), &sel.Fallbacks[i])
			}
			sels[nn] = sel
		}
		p.Selectors = sels
	}
	for i := range p.InteractionHints {
		f(fmt.Sprintf("interaction_hints[%d]", i), &p.InteractionHints[i])
	}
	for i := range p.AntiPatterns {
		f(fmt.Sprintf("anti_patterns[%d]", i), &p.AntiPatterns[i])
	}
	for i := range p.KnownBlockers {
		b := &p.KnownBlockers[i]
		w := fmt.Sprintf("known_blockers[%d].", i)
		f(w+"type", &b.Type)
		f(w+"selector", &b.Selector)
		f(w+"action", &b.Action)
		f(w+"note", &b.Note)
	}
	f("extraction_query", &p.ExtractionQuery)
	return reds
}

// ScrubFacts scrubs every text field of a facts entry in place (for facts
// built from traces written before the scrubber, or edited by hand) and
// reports whether it changed anything. The caller recomputes the revision.
func ScrubFacts(f *Facts) bool {
	if f == nil {
		return false
	}
	changed := false
	s := func(p *string) {
		if out, kinds := ScrubText(*p); len(kinds) > 0 {
			*p, changed = out, true
		}
	}
	s(&f.Intent)
	s(&f.TaskType)
	for i := range f.URLPatterns {
		s(&f.URLPatterns[i])
	}
	if len(f.Selectors) > 0 {
		sels := make(map[string]Selector, len(f.Selectors))
		for _, n := range sortedKeys(f.Selectors) {
			sel, nn := f.Selectors[n], n
			s(&nn)
			sel.Fallbacks = append([]string(nil), sel.Fallbacks...)
			s(&sel.Primary)
			for i := range sel.Fallbacks {
				s(&sel.Fallbacks[i])
			}
			sels[nn] = sel
		}
		f.Selectors = sels
	}
	for i := range f.Steps {
		st := &f.Steps[i]
		st.URL = CleanURL(st.URL)
		for _, p := range []*string{&st.Selector, &st.Value, &st.Param, &st.URL, &st.Error, &st.Result} {
			s(p)
		}
		for j := range st.Fallbacks {
			s(&st.Fallbacks[j])
		}
	}
	s(&f.ExtractionQuery)
	for i := range f.InteractionHints {
		s(&f.InteractionHints[i])
	}
	for i := range f.AntiPatterns {
		s(&f.AntiPatterns[i])
	}
	for i := range f.KnownBlockers {
		b := &f.KnownBlockers[i]
		for _, p := range []*string{&b.Type, &b.Selector, &b.Action, &b.Note} {
			s(p)
		}
	}
	for i := range f.Answers {
		a := &f.Answers[i]
		s(&a.Query)
		s(&a.Value)
		s(&a.SourceURL)
	}
	return changed
}

// ScrubRecall scrubs a recall before it is shown (JSON or Memory), so that a
// tree written before the scrubber, or edited by hand, shows no secret.
func ScrubRecall(r *Recall) {
	if r == nil {
		return
	}
	s := func(p *string) { *p, _ = ScrubText(*p) }
	s(&r.Intent)
	s(&r.URLPattern)
	if len(r.PrimarySelectors) > 0 {
		m := make(map[string]string, len(r.PrimarySelectors))
		for _, k := range sortedKeys(r.PrimarySelectors) {
			v, nk := r.PrimarySelectors[k], k
			s(&nk)
			s(&v)
			m[nk] = v
		}
		r.PrimarySelectors = m
	}
	if len(r.Fallbacks) > 0 {
		m := make(map[string][]string, len(r.Fallbacks))
		for _, k := range sortedKeys(r.Fallbacks) {
			nk := k
			s(&nk)
			fb := append([]string(nil), r.Fallbacks[k]...)
			for i := range fb {
				s(&fb[i])
			}
			m[nk] = fb
		}
		r.Fallbacks = m
	}
	steps := make([]Step, len(r.Steps))
	copy(steps, r.Steps)
	for i := range steps {
		st := &steps[i]
		st.Fallbacks = append([]string(nil), st.Fallbacks...)
		for _, p := range []*string{&st.Selector, &st.Value, &st.Param, &st.URL, &st.Error, &st.Result} {
			s(p)
		}
		for j := range st.Fallbacks {
			s(&st.Fallbacks[j])
		}
	}
	if r.Steps != nil {
		r.Steps = steps
	}
	s(&r.ExtractionQuery)
	r.KnownBlockers = append([]Blocker(nil), r.KnownBlockers...)
	for i := range r.KnownBlockers {
		b := &r.KnownBlockers[i]
		for _, p := range []*string{&b.Type, &b.Selector, &b.Action, &b.Note} {
			s(p)
		}
	}
	for _, l := range []*[]string{&r.AntiPatterns, &r.InteractionHints, &r.Warnings} {
		if *l == nil {
			continue
		}
		c := append([]string{}, (*l)...)
		for i := range c {
			s(&c[i])
		}
		*l = c
	}
	if r.SiteNotes != nil {
		ns := append([]SiteNote{}, r.SiteNotes...)
		for i := range ns {
			for _, p := range []*string{&ns[i].URLPattern, &ns[i].Type, &ns[i].Selector, &ns[i].Action} {
				s(p)
			}
		}
		r.SiteNotes = ns
	}
	if r.RelatedRoutes != nil {
		rs := append([]RelatedRoute{}, r.RelatedRoutes...)
		for i := range rs {
			rc := &Recall{Intent: rs[i].Intent, URLPattern: rs[i].URLPattern, Steps: rs[i].Steps}
			ScrubRecall(rc)
			rs[i].Intent, rs[i].URLPattern, rs[i].Steps = rc.Intent, rc.URLPattern, rc.Steps
		}
		r.RelatedRoutes = rs
	}
	if r.Answers != nil {
		as := append([]Answer{}, r.Answers...)
		for i := range as {
			s(&as[i].Query)
			s(&as[i].Value)
			s(&as[i].SourceURL)
		}
		r.Answers = as
	}
}

// ScrubJSON scrubs every string (keys included) of a JSON document; it
// returns data itself when nothing changed (so field order is kept), else the
// document re-encoded. Output paths that print arbitrary JSON use it.
func ScrubJSON(data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		out, _ := ScrubText(string(data))
		return []byte(out)
	}
	changed := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			out, kinds := ScrubText(x)
			if len(kinds) > 0 {
				changed = true
			}
			return out
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
			return x
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[walk(k).(string)] = walk(e)
			}
			return m
		}
		return v
	}
	v = walk(v)
	if !changed {
		return data
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if bytes.Contains(data, []byte("\n  ")) {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return data
	}
	out := buf.Bytes()
	if !bytes.HasSuffix(data, []byte("\n")) {
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	return out
}

// CleanURL is how a step's or the final URL is stored: control characters
// (CR, LF, NUL, tabs) removed and, for an http(s) URL, the userinfo dropped
// and the scheme and host lower-cased. It stays the URL the run visited
// (www., query and fragment kept): replay navigates to it.
func CleanURL(raw string) string {
	out, _ := cleanURL(raw)
	return out
}

// cleanURL is CleanURL, and reports whether it dropped userinfo.
func cleanURL(raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return -1
		}
		return r
	}, raw)
	clean = strings.TrimSpace(clean)
	l := strings.ToLower(clean)
	if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
		return clean, false
	}
	u, err := url.Parse(clean)
	if err != nil || u.Host == "" {
		return clean, false
	}
	user := u.User != nil
	u.User = nil
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return u.String(), user
}

package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/pemdev/pem/engine"
)

// Secrets: tasks and planners see {{secret:NAME}} only. A value is resolved
// at the last moment, inside the call that types it into the page, and is
// scrubbed back to its placeholder from everything a run shows or stores:
// observations, tool results, answers, logs and the trace (engine.Redact, fed
// the same map through Engine.Secrets).

var (
	secretNameRe = engine.LazyRE(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	placeholerRe = engine.LazyRE(`\{\{secret:([^{}]*)\}\}`)
)

// ErrSecret is returned for a secret that is declared wrongly or not declared.
var ErrSecret = errors.New("secret")

// ValidSecretName reports whether name can be a secret's name: a letter, then
// up to 63 letters, digits, '_', '.', '-'.
func ValidSecretName(name string) bool { return secretNameRe.MatchString(name) }

// SecretNamesIn returns the names of the placeholders in s, in order of first use.
func SecretNamesIn(s string) []string { return firstGroups(placeholerRe, s) }

// ResolveSecrets replaces each {{secret:NAME}} in s with its value. A name
// that is not declared is an error naming it (never the value of anything).
func ResolveSecrets(s string, secrets map[string]string) (string, error) {
	var missing []string
	out := placeholerRe.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholerRe.FindStringSubmatch(m)[1]
		v, ok := secrets[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%w %s is not declared: pass --secret %s=ENV_VAR or put %s=value in --secrets-file", ErrSecret, strings.Join(missing, ", "), missing[0], missing[0])
	}
	return out, nil
}

// Scrub replaces every secret value in s by its placeholder, longest values
// first. Values shorter than 4 bytes are left alone, as engine.Redact does (a
// shorter "secret" would shred ordinary text).
func Scrub(s string, secrets map[string]string) string {
	if len(secrets) == 0 || s == "" {
		return s
	}
	names := make([]string, 0, len(secrets))
	for n, v := range secrets {
		if len(v) >= 4 {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if len(secrets[names[i]]) != len(secrets[names[j]]) {
			return len(secrets[names[i]]) > len(secrets[names[j]])
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		s = strings.ReplaceAll(s, secrets[n], engine.SecretPlaceholder(n))
	}
	return s
}

// SecretsFromEnv reads --secret NAME=ENV_VAR specs: each secret's value is
// the environment variable's, so the value never appears on a command line.
func SecretsFromEnv(specs []string, getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, spec := range specs {
		name, env, ok := strings.Cut(spec, "=")
		name, env = strings.TrimSpace(name), strings.TrimSpace(env)
		if !ok || name == "" || env == "" {
			return nil, fmt.Errorf("%w %q: want NAME=ENV_VAR (the name of an environment variable holding the value)", ErrSecret, spec)
		}
		if !ValidSecretName(name) {
			return nil, fmt.Errorf("%w name %q: use a letter, then letters, digits, '_', '.', '-'", ErrSecret, name)
		}
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("%w %s: environment variable %s is empty or not set: export it first", ErrSecret, name, env)
		}
		out[name] = v
	}
	return out, nil
}

// ReadSecretsFile reads a secrets file: one NAME=value a line; blank lines
// and lines starting with '#' are skipped. warning is non-empty when the file
// is readable by others than its owner (it should be mode 0600).
func ReadSecretsFile(path string) (secrets map[string]string, warning string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w file %s: %w", ErrSecret, path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		warning = fmt.Sprintf("secrets file %s has mode %04o: others can read it; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, warning, fmt.Errorf("%w file %s: %w", ErrSecret, path, err)
	}
	secrets, err = ParseSecrets(data)
	if err != nil {
		return nil, warning, fmt.Errorf("%s: %w", path, err)
	}
	return secrets, warning, nil
}

// ParseSecrets parses NAME=value lines. Errors name the line, never a value.
func ParseSecrets(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || !ValidSecretName(name) {
			return nil, fmt.Errorf("%w line %d: want NAME=value with a name of letters, digits, '_', '.', '-'", ErrSecret, n)
		}
		if v == "" {
			return nil, fmt.Errorf("%w line %d (%s): the value is empty", ErrSecret, n, name)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecret, err)
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

package gitrepo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsupportedRepo: a repository pem cannot read or write, such as one
// made with git init --object-format=sha256 (go-git reads SHA-1 only).
var ErrUnsupportedRepo = errors.New("unsupported git repository")

// checkFormat refuses a repository whose git directory common declares an
// object format other than SHA-1 (extensions.objectformat).
func checkFormat(root, common string) error {
	data, err := os.ReadFile(filepath.Join(common, "config"))
	if err != nil {
		return nil // no config: git's defaults, SHA-1
	}
	if f := objectFormat(data); f != "" && f != "sha1" {
		return fmt.Errorf("%s: %w: it names objects with %s (extensions.objectformat), and pem reads and writes SHA-1 repositories only", root, ErrUnsupportedRepo, formatName(f))
	}
	return nil
}

func formatName(f string) string {
	if f == "sha256" {
		return "SHA-256"
	}
	return f
}

// objectFormat reads extensions.objectformat from a git config ("" when unset).
func objectFormat(config []byte) string {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(config))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = strings.ToLower(strings.Trim(strings.Fields(strings.Trim(line, "[]"))[0], `"`))
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if ok && section == "extensions" && strings.EqualFold(strings.TrimSpace(key), "objectformat") {
			return strings.ToLower(strings.Trim(strings.TrimSpace(val), `"`))
		}
	}
	return ""
}

// CheckSupported reports ErrUnsupportedRepo when dir (or, when dir does not
// exist yet, its nearest existing parent) lies in a repository pem cannot
// use; nil when it lies in a usable one or in none. pem init calls it before
// writing anything.
func CheckSupported(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	for {
		if _, err := os.Stat(abs); err == nil {
			break
		}
		up := filepath.Dir(abs)
		if up == abs {
			return nil
		}
		abs = up
	}
	r, err := openRepo(abs)
	if err != nil {
		if errors.Is(err, ErrUnsupportedRepo) {
			return err
		}
		return nil // no repository (or an unreadable one: Init says why)
	}
	r.close()
	return nil
}

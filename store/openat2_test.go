package store

import (
	"testing"
)

// TestPortablePathToo runs the confinement and cache tests through the
// portable path (an lstat per parent) as well as through openat2, which
// Linux uses when it can: both must refuse the same links and see the same
// changes.
func TestPortablePathToo(t *testing.T) {
	useOpenat2(false)
	defer useOpenat2(true)
	t.Run("symlinks", TestSymlinksRefused)
	t.Run("cache", TestCacheSeesEveryChange)
}

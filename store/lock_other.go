//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) {
	return false, errors.New("the tree lock needs flock, which this system lacks")
}

func unlock(*os.File) error { return nil }

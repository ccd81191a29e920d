//go:build !linux

package store

import "errors"

// No change watch here (watch.go): Generation says so, and the engine
// computes every query.
func newWatchFD(dir string) (int, error) { return -1, errors.New("no change watch on this system") }
func closeWatchFD(fd int)                {}
func addWatch(fd int, abs string) (int32, error) {
	return -1, errors.New("no change watch on this system")
}
func removeWatch(fd int, wd int32) {}
func isNotExist(err error) bool    { return false }
func readEvents(fd int, buf []byte, fn func(wd int32, name string, self, sub, overflow bool)) error {
	return nil
}

//go:build linux

package store

import (
	"errors"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The inotify half of the change watch (watch.go).

const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// localFS: file systems whose changes all pass through this kernel, so
// inotify sees each of them (not NFS, SMB, FUSE, 9p: another machine or a
// daemon can change those unseen).
var localFS = map[int64]bool{
	0xEF53:     true, // ext2, ext3, ext4
	0x58465342: true, // xfs
	0x9123683E: true, // btrfs
	0x01021994: true, // tmpfs
	0xF2F52010: true, // f2fs
	0x2FC12FC1: true, // zfs
	0x794C7630: true, // overlayfs (changes go through the overlay)
}

// newWatchFD opens a non-blocking inotify instance for the tree at dir,
// when dir is on a local file system.
func newWatchFD(dir string) (int, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, err
	}
	if !localFS[int64(st.Type)] {
		return -1, errors.New("not a local file system")
	}
	return unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
}

func closeWatchFD(fd int) { unix.Close(fd) }

func addWatch(fd int, abs string) (int32, error) {
	wd, err := unix.InotifyAddWatch(fd, abs, watchMask)
	return int32(wd), err
}

func removeWatch(fd int, wd int32) { _, _ = unix.InotifyRmWatch(fd, uint32(wd)) }

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

// readEvents reads every pending event and hands each to fn; nil when
// none is left (the read would block).
func readEvents(fd int, buf []byte, fn func(wd int32, name string, self, sub, overflow bool)) error {
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n <= 0:
			return errors.New("inotify: short read")
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if l := int(ev.Len); l > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+l]
				for i, c := range b {
					if c == 0 {
						b = b[:i]
						break
					}
				}
				name = string(b)
			}
			m := ev.Mask
			fn(ev.Wd, name, m&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0,
				m&unix.IN_ISDIR != 0, m&unix.IN_Q_OVERFLOW != 0)
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

package store

import (
	"container/list"
	"io/fs"
	"sync"
	"time"
)

// Caches for the query path. Decoding YAML costs ~80 µs a file, a stat ~1 µs:
// a warm Query stats what it needs and decodes nothing that did not change.
//
// An entry is keyed by its path and the file's identity (device, inode, size,
// mtime, ctime), so every replacement by rename (a new inode) and every edit
// in place is seen at the next stat. File systems stamp times with a coarse
// clock, so a change within the same tick as our read could keep the same
// key: like git's "racy" index entries, a file or directory changed less than
// racyWindow before we read it is not cached (traces are the exception: they
// are written once, complete, and never edited).
const racyWindow = 2 * time.Second

// Cache bounds (entries). 1,000 domains × 10 intents × (facts + experience)
// fit in records; traces hold the recent ones a query decodes.
const (
	maxRecordEntries = 50_000
	maxTraceEntries  = 50_000
	maxDirEntries    = 50_000
)

// lru is a bounded map from path to a value valid for one file identity.
type lru struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

type lruItem struct {
	key     string
	id      fileID
	v       any
	checked time.Time // when the identity was last confirmed
}

func newLRU(max int) *lru {
	return &lru{max: max, ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns the value cached for key if the file still has identity id,
// and records that it was confirmed at now.
func (c *lru) get(key string, id fileID, now time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil, false
	}
	it := e.Value.(*lruItem)
	if it.id != id {
		c.ll.Remove(e)
		delete(c.m, key)
		return nil, false
	}
	it.checked = now
	c.ll.MoveToFront(e)
	return it.v, true
}

// fresh returns the value cached for key if its identity was confirmed less
// than window before now (Options.Revalidate), without a stat.
func (c *lru) fresh(key string, now time.Time, window time.Duration) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil, false
	}
	it := e.Value.(*lruItem)
	if age := now.Sub(it.checked); age < 0 || age >= window {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return it.v, true
}

func (c *lru) put(key string, id fileID, v any, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		it := e.Value.(*lruItem)
		it.id, it.v, it.checked = id, v, now
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(&lruItem{key: key, id: id, v: v, checked: now})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*lruItem).key)
	}
}

func (c *lru) del(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.Remove(e)
		delete(c.m, key)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// trusted reports whether fi last changed long enough before now that a
// later change must show in its identity.
func trusted(fi fs.FileInfo, now time.Time) bool {
	id := idOf(fi)
	limit := now.Add(-racyWindow).UnixNano()
	return id.mtime < limit && id.ctime < limit
}

package engine

import "sync"

// memo remembers a pure function's results by string argument, up to max
// of them (then it starts over), for arguments of at most maxMemoKey bytes:
// a warm query scores the words of every intent key of its domain and
// grades the freshness of each answer it serves, the same strings query
// after query.
type memo[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

const maxMemoKey = 256

func (c *memo[V]) get(k string, f func(string) V) V {
	if len(k) > maxMemoKey {
		return f(k)
	}
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = f(k)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]V)
	}
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// knownIntent is an intent's key and tokens, as IntentScore compares them.
type knownIntent struct {
	key    string
	tokens []string // never modified: shared by every caller
}

var intentMemo = memo[knownIntent]{max: 1 << 14}

func intentOf(s string) knownIntent {
	return intentMemo.get(s, func(s string) knownIntent { return knownIntent{IntentKey(s), Tokens(s)} })
}

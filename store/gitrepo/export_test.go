package gitrepo

// SetTestHookBeforeStatePush sets the hook that runs between sync's fetch
// and its push of the state ref, for the external tests; it returns a
// function that restores the previous one.
func SetTestHookBeforeStatePush(f func()) (restore func()) {
	old := testHookBeforeStatePush
	testHookBeforeStatePush = f
	return func() { testHookBeforeStatePush = old }
}

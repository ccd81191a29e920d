package gitrepo

import "context"

// The tests of one call open the repository for that call, as a command does.

func commitDir(ctx context.Context, dir string, paths []string, msg string, sig Signature) (string, error) {
	r, err := Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.Commit(ctx, paths, msg, sig)
}

func commitSeriesDir(ctx context.Context, dir string, reqs []CommitRequest, sig Signature) ([]string, error) {
	r, err := Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.CommitSeries(ctx, reqs, sig)
}

func commitToBranchDir(ctx context.Context, dir, branch string, files map[string][]byte, msg string, sig Signature) (string, error) {
	r, err := Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.CommitToBranch(ctx, branch, files, msg, sig)
}

func headDir(ctx context.Context, dir string) (string, error) {
	r, err := Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.Head(ctx)
}

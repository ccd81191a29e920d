package main

import (
	"context"

	"github.com/pemdev/pem/store"
	"github.com/pemdev/pem/store/gitrepo"
)

// The git side of the one-shot commands: each opens the tree's repository
// once (gitrepo.Open), does its one thing and closes it.

func installMergeDriver(ctx context.Context, dir string) error {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.InstallMergeDriver(ctx, "", store.GitAttributes)
}

func syncTree(ctx context.Context, dir string, opt gitrepo.SyncOptions) (*gitrepo.SyncResult, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Sync(ctx, opt)
}

// commitTree commits exactly paths of the tree at dir as DefaultSignature.
func commitTree(ctx context.Context, dir string, paths []string, msg string) (string, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.Commit(ctx, paths, msg, gitrepo.Signature{})
}

// commitToBranch commits files onto a review branch (HEAD's child) as
// DefaultSignature.
func commitToBranch(ctx context.Context, dir, branch string, files map[string][]byte, msg string) (string, error) {
	r, err := gitrepo.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.CommitToBranch(ctx, branch, files, msg, gitrepo.Signature{})
}

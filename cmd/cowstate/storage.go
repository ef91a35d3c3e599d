package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
)

// The commands name a checkpoint store by a URL that storeurl.Open
// understands: a directory (a path or file:///path), mem://, s3://,
// gs:// or azblob://. Messages name it by storeurl.Redact's form (no user
// information, no query but the prefix); credentials come from the
// environment, never from the URL.

// storeName is how messages name the store at rawURL.
func storeName(rawURL string) string {
	if dir, ok := storeurl.LocalDir(rawURL); ok {
		return dir
	}
	return storeurl.Redact(rawURL)
}

// openExisting opens the store at rawURL for inspect and verify, which
// only read: a directory must exist already (checkpoint.Dir would create
// it).
func openExisting(ctx context.Context, rawURL string) (checkpoint.Storage, error) {
	if dir, ok := storeurl.LocalDir(rawURL); ok {
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("no checkpoint store at %s: %w (give the -dir or -store of a cowstate demo run with -keep, or another checkpoint store)", dir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("no checkpoint store at %s: not a directory", dir)
		}
	}
	return storeurl.Open(ctx, rawURL)
}

// openEmpty opens the store at rawURL for a demo run, which restores the
// newest checkpoint it finds: the store must hold nothing. A directory is
// created if needed and must hold no file at all.
func openEmpty(ctx context.Context, rawURL string) (checkpoint.Storage, error) {
	if dir, ok := storeurl.LocalDir(rawURL); ok {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("%s is not empty: give a new or empty directory (the demo restores the newest checkpoint it finds there)", dir)
		}
	}
	st, err := storeurl.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	names, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("%s is not empty (%d objects, %s first): give a new or empty store (the demo restores the newest checkpoint it finds there)", st, len(names), names[0])
	}
	return st, nil
}

// storeArg returns the store URL of inspect and verify: -store URL or
// one directory argument, not both.
func storeArg(storeURL string, args []string) (string, error) {
	switch {
	case storeURL != "" && len(args) > 0:
		return "", usageError{"give the store as -store URL or as a directory argument, not both"}
	case storeURL != "":
		return storeURL, nil
	case len(args) == 0:
		return "", usageError{"need the checkpoint directory as the argument, or -store URL"}
	case len(args) > 1:
		return "", usageError{fmt.Sprintf("need one checkpoint directory, got %d arguments: %s", len(args), strings.Join(args, " "))}
	}
	return args[0], nil
}

package storeurl_test

import (
	"fmt"
	"testing"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
	"github.com/cowstate/cowstate/checkpoint/storagetest"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// TestBucket_Conformance runs package storagetest's checks on a bucket
// storage in memory and on a real S3 server (versitygw, one per run, a
// fresh prefix per check).
func TestBucket_Conformance(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		storagetest.Run(t, func(t testing.TB) checkpoint.Storage {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			return storeurl.Bucket(b, "mem://")
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Start(t)
		srv.SetEnv(t)
		n := 0
		storagetest.Run(t, func(t testing.TB) checkpoint.Storage {
			n++
			url := srv.URL(fmt.Sprintf("store%d/", n))
			b, err := blob.OpenBucket(bg, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return storeurl.Bucket(b, url)
		})
	})
}

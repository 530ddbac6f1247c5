package retention_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/reporting/retention"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestRemovesOldFiles, on the S3 test server: the objects under the exports
// and reports prefixes last written before the cut-off are removed, page by
// page; newer ones, and other prefixes, stay.
func TestRemovesOldFiles(t *testing.T) {
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(key string) time.Time {
		t.Helper()
		if _, err := st.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(cfg.S3Bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
		info, ok, err := st.Head(ctx, key)
		if err != nil || !ok {
			t.Fatalf("head %s: %v %v", key, ok, err)
		}
		return info.LastModified
	}
	var old []string
	for i := range 5 {
		old = append(old, fmt.Sprintf("exports/mp1/old%d.csv", i))
	}
	old = append(old, "scored-attribution/mp1/2026-01-05/part-0.parquet")
	var last time.Time
	for _, k := range append(slices.Clone(old), "other/old.txt", "exportsx/old.csv") {
		last = put(k)
	}
	// The server's times are in seconds: the new files are written in a
	// later second.
	testenv.Eventually(t, 5*time.Second, func() error {
		if !time.Now().Truncate(time.Second).After(last) {
			return fmt.Errorf("still the second of the old files")
		}
		return nil
	})
	newer := put("exports/mp1/new.csv")
	put("scored-attribution/mp1/2026-02-05/part-0.parquet")
	if !newer.After(last) {
		t.Fatalf("new file written at %s, not after the old ones (%s)", newer, last)
	}
	f := &retention.Files{S3: st, PageSize: 2, Log: testenv.Logger(t), Now: func() time.Time { return newer.AddDate(0, 0, 7) },
		Rules: []retention.FileRule{{Prefix: retention.ExportsPrefix, Keep: config.Age{Days: 7}}, {Prefix: retention.ReportsPrefix, Keep: config.Age{Days: 7}}}}
	n, err := f.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(old) {
		t.Errorf("removed %d files, want %d", n, len(old))
	}
	objs, _, err := st.ListPage(ctx, "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, o := range objs {
		left = append(left, o.Key)
	}
	if want := "[exports/mp1/new.csv exportsx/old.csv other/old.txt scored-attribution/mp1/2026-02-05/part-0.parquet]"; fmt.Sprint(left) != want {
		t.Errorf("left %v, want %s", left, want)
	}
	// Nothing more to remove; a rule kept for ever removes nothing.
	f.Rules = append(f.Rules, retention.FileRule{Prefix: "other/"})
	if n, err := f.Once(ctx); err != nil || n != 0 {
		t.Errorf("second run removed %d (%v)", n, err)
	}
}

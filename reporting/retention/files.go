package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/storage/s3store"
)

// Export and report files' prefixes in the bucket (reporting/exports.ObjectKey,
// reporting/scoredfiles.Key).
const (
	ExportsPrefix = "exports/"
	ReportsPrefix = "scored-attribution/"
)

// FileRule keeps the objects under Prefix for Keep after they were last
// written.
type FileRule struct {
	Prefix string
	Keep   config.Age
}

// Files removes the objects of each rule older than its bound.
type Files struct {
	S3    *s3store.Store
	Rules []FileRule
	// PageSize: objects listed, and removed, per request (1,000 when 0).
	PageSize int32
	Log      *slog.Logger
	Now      func() time.Time
}

// Once lists every rule's prefix page by page and removes, a page at a time,
// the objects last written before the cut-off; it returns how many it
// removed. Each request has the store's deadline; the run, its caller's.
func (f *Files) Once(ctx context.Context) (int, error) {
	now := time.Now()
	if f.Now != nil {
		now = f.Now()
	}
	size := f.PageSize
	if size <= 0 || size > 1000 {
		size = 1000
	}
	removed := 0
	for _, r := range f.Rules {
		if r.Keep.Forever() {
			continue
		}
		cutoff := r.Keep.Cutoff(now)
		n, token := 0, ""
		for {
			objs, next, err := f.S3.ListPage(ctx, r.Prefix, token, size)
			if err != nil {
				return removed, fmt.Errorf("retention: %w", err)
			}
			var old []string
			for _, o := range objs {
				if o.LastModified.Before(cutoff) {
					old = append(old, o.Key)
				}
			}
			if err := f.S3.Delete(ctx, old); err != nil {
				return removed, fmt.Errorf("retention: %w", err)
			}
			n += len(old)
			removed += len(old)
			if next == "" {
				break
			}
			token = next
		}
		if n > 0 {
			f.Log.Info("retention: removed old files", "prefix", r.Prefix, "files", n, "cutoff", cutoff.Format(time.RFC3339))
		}
	}
	return removed, nil
}

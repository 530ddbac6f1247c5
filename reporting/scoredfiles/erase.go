package scoredfiles

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/storage/redisstore"
)

// eraseLockWait bounds the wait of Erase for a day's lock held by a run
// that produces the day.
const eraseLockWait = 2 * time.Minute

// Erase rewrites the stored file of a marketplace's local day with the
// opaque_user_id of every row of the given users blanked (""), as
// attributed_purchases holds those rows once the users are erased
// (docs/operations/privacy.md); every other byte of a row, the rows' order, the
// file's metadata (produced-at, final) and its key stay. The new file
// replaces the old one at once (a multipart upload published on its
// completion, under the day's lock, as Produce does); a day without a
// file, or whose file has no row of the users, is left as it is. It
// returns the rows whose user it blanked.
func (s *Service) Erase(ctx context.Context, marketplaceID string, day time.Time, users map[string]bool) (int64, error) {
	if _, err := uuid.Parse(marketplaceID); err != nil {
		return 0, fmt.Errorf("scoredfiles: marketplace id %q: %w", marketplaceID, err)
	}
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	key := "ec:lock:scored-attribution:" + marketplaceID + ":" + day.Format(time.DateOnly)
	deadline := time.Now().Add(eraseLockWait)
	for {
		lctx, release, err := redisstore.Lease(ctx, s.rdb, key, lockTTL)
		if err == nil {
			n, err := s.erase(lctx, marketplaceID, day, users)
			release()
			return n, err
		}
		if !errors.Is(err, redisstore.ErrBusy) || time.Now().After(deadline) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}

func (s *Service) erase(ctx context.Context, marketplaceID string, day time.Time, users map[string]bool) (int64, error) {
	st, ok, err := s.Stored(ctx, marketplaceID, day)
	if err != nil || !ok {
		return 0, err
	}
	up, err := s.s3.NewUpload(ctx, st.Key, contentType, st.info.Metadata, s.PartSize)
	if err != nil {
		return 0, err
	}
	defer up.Abort() // no-op after Complete
	var blanked int64
	if _, err := s.copyRows(ctx, st, up, nil, func(r *Record) bool {
		if users[r.OpaqueUserID] {
			r.OpaqueUserID = ""
			blanked++
		}
		return true
	}); err != nil {
		return 0, err
	}
	if blanked == 0 {
		return 0, nil // the upload is aborted: the file stays as it is
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("scoredfiles: erase %s %s: %w", marketplaceID, day.Format(time.DateOnly), context.Cause(ctx))
	}
	if _, err := up.Complete(); err != nil {
		return 0, err
	}
	s.log.Info("scored attribution file rewritten without erased users", "marketplace", marketplaceID, "day", day.Format(time.DateOnly), "rows", blanked)
	return blanked, nil
}

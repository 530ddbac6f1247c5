package segments

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/bounded"
	"github.com/endcap/endcap/internal/validation"
)

// Caps bound what a marketplace's segments hold in the shared Redis: the
// members and the bytes (Redis's own estimate, MEMORY USAGE) of one
// segment, and of all the segments of a marketplace together. 0: no cap
// (the defaults are settings: ENDCAP_SEGMENT_MAX_MEMBERS and the others).
type Caps struct {
	SegmentMembers     int64
	SegmentBytes       int64
	MarketplaceMembers int64
	MarketplaceBytes   int64
}

// WithCaps sets the caps of segment sizes (default: none).
func WithCaps(c Caps) Option { return func(s *Service) { s.caps = c } }

// usage is what some member sets hold.
type usage struct{ members, bytes int64 }

// measure reads the members (SCARD) and the bytes (MEMORY USAGE, sampled)
// of keys, in one pipeline.
func (s *Service) measure(ctx context.Context, keys []string) (usage, error) {
	if len(keys) == 0 {
		return usage{}, nil
	}
	return bounded.Call(ctx, func(ctx context.Context) (usage, error) {
		pipe := s.rdb.Pipeline()
		cards := make([]*redis.IntCmd, len(keys))
		mems := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cards[i] = pipe.SCard(ctx, k)
			mems[i] = pipe.MemoryUsage(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		if err != nil && err != redis.Nil {
			return usage{}, err
		}
		var u usage
		for i := range keys {
			u.members += cards[i].Val()
			u.bytes += mems[i].Val() // 0 for a key that does not exist
		}
		return u, nil
	}, nil)
}

// checkCaps refuses an upload whose result would pass a cap: seg is what
// the segment would hold; the marketplace's other segments are read from
// Redis (their current generations). Nothing of the upload is live yet.
func (s *Service) checkCaps(ctx context.Context, mp, id string, seg usage) error {
	c := s.caps
	if c == (Caps{}) {
		return nil
	}
	if c.SegmentMembers > 0 && seg.members > c.SegmentMembers {
		return capError("the segment would have " + strconv.FormatInt(seg.members, 10) + " members, more than its cap of " + strconv.FormatInt(c.SegmentMembers, 10))
	}
	if c.SegmentBytes > 0 && seg.bytes > c.SegmentBytes {
		return capError("the segment would take about " + strconv.FormatInt(seg.bytes, 10) + " bytes of Redis, more than its cap of " + strconv.FormatInt(c.SegmentBytes, 10))
	}
	if c.MarketplaceMembers <= 0 && c.MarketplaceBytes <= 0 {
		return nil
	}
	var keys []string
	s.coll.Each(mp, func(other string, st state) bool {
		if other != id && st.Generation != "" {
			keys = append(keys, memberKey(mp, other, st.Generation))
		}
		return true
	})
	others, err := s.measure(ctx, keys)
	if err != nil {
		return unavailable(err)
	}
	if c.MarketplaceMembers > 0 && others.members+seg.members > c.MarketplaceMembers {
		return capError("the marketplace's segments would have " + strconv.FormatInt(others.members+seg.members, 10) + " members together, more than its cap of " + strconv.FormatInt(c.MarketplaceMembers, 10))
	}
	if c.MarketplaceBytes > 0 && others.bytes+seg.bytes > c.MarketplaceBytes {
		return capError("the marketplace's segments would take about " + strconv.FormatInt(others.bytes+seg.bytes, 10) + " bytes of Redis together, more than its cap of " + strconv.FormatInt(c.MarketplaceBytes, 10))
	}
	return nil
}

func capError(msg string) error {
	return validation.New(TypeSegmentTooLarge, msg+"; nothing of this upload was applied", "body", "file")
}

// TypeSegmentTooLarge is the 422 type of an upload refused for a cap.
const TypeSegmentTooLarge = "segment_too_large"

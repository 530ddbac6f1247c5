package exports

import (
	"context"
	"encoding/json"
	"time"

	"github.com/endcap/endcap/management/webhooks"
)

// WebhookDecoder makes export.completed and export.failed from an export's
// entities-log record (webhooks.RouterOptions.Decoders, registered by the
// app for TypeExport), with the export's view: a completed one's presigned
// URLs, made only when a webhook of the marketplace takes the event.
func (s *Service) WebhookDecoder() webhooks.Decoder {
	return func(ctx context.Context, ch webhooks.Change) (string, any, error) {
		var e Export
		if err := json.Unmarshal(ch.State, &e); err != nil || !e.Status.Terminal() {
			return "", nil, nil
		}
		typ := webhooks.TypeExportCompleted
		if e.Status == StatusFailed {
			typ = webhooks.TypeExportFailed
		}
		if !ch.Subscribed(typ) {
			return "", nil, nil // no URL to presign
		}
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := s.ViewOf(vctx, e)
		if err != nil {
			return "", nil, err
		}
		return typ, v, nil
	}
}

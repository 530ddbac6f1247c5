package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// Sign is the webhook-signature header of a message per Standard Webhooks:
// "v1,<base64 of HMAC-SHA256(key, id.timestamp.body)>" for each key,
// space-separated (the current secret first, then the previous one during a
// rotation's overlap).
func Sign(keys [][]byte, msgID string, timestamp int64, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msgID))
		m.Write([]byte{'.'})
		m.Write(strconv.AppendInt(nil, timestamp, 10))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

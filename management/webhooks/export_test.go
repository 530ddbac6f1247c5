package webhooks

import "time"

// SetNow sets the clock of the deliveries' API operations (tests).
func SetNow(d *Deliveries, now func() time.Time) { d.now = now }

package app

import (
	"context"
	"errors"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/internal/telemetry"
)

// redactChecks are checks whose errors, shown by /readyz, have every secret
// of the configuration blanked out.
func redactChecks(checks []api.Check, secrets []string) []api.Check {
	x := telemetry.NewRedactor(secrets)
	out := make([]api.Check, len(checks))
	for i, c := range checks {
		fn := c.Fn
		c.Fn = func(ctx context.Context) error {
			err := fn(ctx)
			if err == nil {
				return nil
			}
			if s := x.String(err.Error()); s != err.Error() {
				return errors.New(s)
			}
			return err
		}
		out[i] = c
	}
	return out
}

package app

import (
	"github.com/endcap/endcap/api"
)

// domains builds the management services on the entities log and returns
// their /public/v1 route sets.
func (a *App) domains() ([]api.RouteSet, error) {
	var routes []api.RouteSet
	return routes, nil
}

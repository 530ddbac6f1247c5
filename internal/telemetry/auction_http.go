package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// Auctions counts auctions run, by kind and whether they had winners.
	Auctions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_auctions_total", Help: "Auctions run, by kind (listings, banners, sponsored_brand, hotels, flights) and filled (true when at least one winner).",
	}, []string{"kind", "filled"})
	// AuctionsRejected counts rejected auction requests by errCode.
	AuctionsRejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_auctions_rejected_requests_total", Help: "Rejected auction requests (400) by errCode.",
	}, []string{"code"})
)

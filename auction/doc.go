// Package auction holds the auctions of /v2: parsing and validating the
// requests of POST /v2/auctions, /v2/auctions/sponsored-brand and
// /v2/auctions/travel (request*.go), and running them (engine*.go, rank.go).
package auction

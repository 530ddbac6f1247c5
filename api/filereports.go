package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/reporting/scoredfiles"
)

// Scored-attribution files (docs/reference/scored-attribution.md).
//
//	GET /reporting-service/file-reports/scored-attribution?report_date=YYYY-MM-DD

// ScoredFiles lists a day's scored-attribution files (scoredfiles.Service).
type ScoredFiles interface {
	Files(ctx context.Context, marketplaceID string, day time.Time) ([]scoredfiles.File, error)
}

// FileReportsRoutes returns the file-reports route set.
func FileReportsRoutes(files ScoredFiles) RouteSet {
	return func(g *gin.RouterGroup, p *Public) {
		g.GET("/reporting-service/file-reports/scored-attribution", p.Limit("default"), func(c *gin.Context) {
			day, err := parseReportDate(c.Query("report_date"), c.Request.URL.Query().Has("report_date"))
			if err != nil {
				p.Fail(c, err)
				return
			}
			mp := Marketplace(c)
			list, err := files.Files(c.Request.Context(), mp.ID, day)
			if err != nil {
				p.Fail(c, err)
				return
			}
			c.JSON(http.StatusOK, gin.H{"files": list})
		})
	}
}

// parseReportDate reads report_date: a calendar date YYYY-MM-DD.
func parseReportDate(s string, present bool) (time.Time, error) {
	if !present || s == "" {
		return time.Time{}, validation.New(validation.Missing, "Field required", "query", "report_date")
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, validation.New("date_from_datetime_parsing", "Input should be a valid date in the format YYYY-MM-DD", "query", "report_date")
	}
	return d, nil
}

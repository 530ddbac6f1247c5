package console

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/money"
)

// loadAssets versions every static file by a hash of its content, so that
// a file can be cached for a year and a new build is fetched at once.
func (c *Console) loadAssets() error {
	c.assets = map[string]string{}
	return fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := strings.TrimPrefix(p, "static/")
		c.assets[name] = "/console/static/" + name + "?v=" + hex.EncodeToString(sum[:6])
		return nil
	})
}

// static serves an embedded file.
func (c *Console) static(ctx *gin.Context) {
	name := path.Clean(strings.TrimPrefix(ctx.Param("file"), "/"))
	if strings.HasPrefix(name, ".") {
		ctx.Status(http.StatusNotFound)
		return
	}
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil {
		ctx.Status(http.StatusNotFound)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	if ctx.Query("v") != "" {
		ctx.Header("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		ctx.Header("Cache-Control", "no-cache")
	}
	ctx.Data(http.StatusOK, ct, b)
}

// --- formatting for the templates ---

// formatMicros writes an amount exactly, with at least two decimals and
// its units grouped by three (12,345.50).
func formatMicros(m int64) string {
	s := money.Micros(m).String()
	units, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	neg := strings.HasPrefix(units, "-")
	units = strings.TrimPrefix(units, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := range len(units) {
		if i > 0 && (len(units)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(units[i])
	}
	return b.String() + "." + frac
}

func formatRatio(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func formatPct(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + " %"
}

// formatInt writes an integer with thin groups of three (1 234 567).
func formatInt(n any) string {
	var s string
	switch v := n.(type) {
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case uint64:
		s = strconv.FormatUint(v, 10)
	default:
		return "?"
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(",")
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

package api

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// DefaultDocURLBase is where the documentation is read by default
// (ENDCAP_DOC_URL_BASE): an error's docUrl is <base>/reference/errors.md#<errCode>.
const DefaultDocURLBase = "https://github.com/endcap/endcap/blob/main/docs"

// docBase is the documentation base of the process (Deps.DocURLBase, set
// by New; one per process, as its configuration is): read where an error
// body is built, so that no request carries it.
var docBase atomic.Pointer[string]

// docURL is the docUrl of an error code: the deployment's documentation
// base + /reference/errors.md#code.
func docURL(code string) string {
	base := DefaultDocURLBase
	if b := docBase.Load(); b != nil {
		base = *b
	}
	return base + "/reference/errors.md#" + code
}

// v2Error is the /v2 error body (wire-contract.md): one JSON object.
type v2Error struct {
	ErrCode string `json:"errCode"`
	DocURL  string `json:"docUrl"`
	Message string `json:"message"`
}

func abortV2(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, v2Error{ErrCode: code, DocURL: docURL(code), Message: msg})
}

func abortUnavailable(c *gin.Context, retryAfter time.Duration, msg string) {
	setRetryAfter(c, retryAfter)
	abortV2(c, http.StatusServiceUnavailable, "service_unavailable", msg)
}

// authError is the body of 401 and 403 answers. The spec ("Authentication")
// gives {error, message}; the /v2 wire contract gives every /v2 error as
// {errCode, docUrl, message}. One object with all four keys satisfies both,
// on every route.
type authError struct {
	Error   string `json:"error"`
	ErrCode string `json:"errCode"`
	DocURL  string `json:"docUrl"`
	Message string `json:"message"`
}

func abortAuth(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, authError{Error: code, ErrCode: code, DocURL: docURL(code), Message: msg})
}

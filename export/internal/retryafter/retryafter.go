// Package retryafter reads the Retry-After header that the sinks posting
// to a server (export/http, export/otel) honour.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads a Retry-After value, seconds or an HTTP date, as how long to
// wait; 0 when v is empty, malformed or in the past.
func Parse(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

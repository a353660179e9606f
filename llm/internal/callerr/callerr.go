// Package callerr holds the error types the model providers (llm/openai,
// llm/anthropic) share for a failed call, so that both report failures
// the same way.
package callerr

import (
	"errors"
	"fmt"
	"net"
	"net/url"
)

// API returns an error whose text is msg, a message of Loupe's for an
// API error the SDK returned (err), which it wraps.
func API(msg string, err error) error { return &apiError{msg: msg, err: err} }

type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// Unreachable reports whether err says the server could not be reached
// (a URL or network error), as opposed to an answer from it.
func Unreachable(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// Retried says in err how many attempts the SDK made when it retried, so
// the model.call record shows the retries behind a failure. With one
// attempt or none it returns err as it is.
func Retried(err error, attempts int) error {
	if attempts <= 1 {
		return err
	}
	return &retryError{attempts: attempts, err: err}
}

type retryError struct {
	attempts int
	err      error
}

func (e *retryError) Error() string { return fmt.Sprintf("%v (after %d attempts)", e.err, e.attempts) }
func (e *retryError) Unwrap() error { return e.err }

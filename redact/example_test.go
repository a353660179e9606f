package redact_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/trace"
)

// Switching redaction on for a tracer: every value and every string
// (names, errors, tags) passes through the redactor before it is recorded.
func ExampleRedactor_Options() {
	tr := trace.New(redact.Default().Options(trace.Options{}))
	_, run := tr.Start(context.Background(), "deploy", trace.RunOptions{})
	run.ToolCall("http", trace.JSON(map[string]string{"url": "https://api.example.com", "api_key": "abc123"}), nil, 0,
		errors.New("401 Unauthorized: Bearer eyJraWQ rejected"))
	r := run.Records()[1]
	fmt.Println(r.Input)
	fmt.Println(r.Error)
	// Output:
	// {"api_key":"[REDACTED]","url":"https://api.example.com"}
	// 401 Unauthorized: Bearer [REDACTED] rejected
}

// Changing the rules: drop one, add one of your own, change the
// replacement text.
func ExampleNew() {
	c := redact.DefaultConfig().Without("url-credentials").With(redact.Rule{
		Name:     "employee-id",
		Keywords: []string{"EMP-"},
		Pattern:  regexp.MustCompile(`EMP-\d{6}`),
	})
	c.Replacement = "***"
	rd, err := redact.New(c)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rd.String("EMP-123456 logged in with password=hunter2"))
	// Output: *** logged in with password=***
}

// Scrubbing a record made elsewhere, as a collector does at ingest.
func ExampleRedactor_Record() {
	r := trace.Record{Type: trace.TypeError, Error: "connect postgres://app:s3cret@db:5432/prod: timeout"}
	redact.Default().Record(&r)
	fmt.Println(r.Error)
	// Output: connect postgres://app:[REDACTED]@db:5432/prod: timeout
}

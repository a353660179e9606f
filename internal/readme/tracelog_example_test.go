package readme_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/loupe-dev/loupe/trace/tracelog"
)

func Example_tracelog() {
	ctx := context.Background() // a tool's context, inside a run
	city := "Lyon"

	// README: tracelog
	logger := slog.New(tracelog.New(slog.NewJSONHandler(os.Stderr, nil), nil))
	logger.InfoContext(ctx, "fetching forecast", "city", city) // inside a tool: a log record under the tool call
	// README: end
}

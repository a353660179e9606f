package readme_test

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

func Example_sessions() {
	ctx := context.Background()
	tr := trace.New(trace.Options{})
	question, threadID, userID := "And the address?", "thread-7", "ada"

	// README: sessions
	ctx, run := tr.Start(ctx, "support-agent", trace.RunOptions{
		Input:   trace.Text(question),
		Session: threadID, // the conversation this run answers in
		User:    userID,
	})
	// README: end

	_ = ctx
	run.End(nil, nil)
}

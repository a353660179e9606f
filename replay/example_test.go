package replay_test

import (
	"context"
	"fmt"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
)

// A run recorded once is replayed against changed agent code: here the
// system prompt changed, and the replay says where that shows.
func Example() {
	ctx := context.Background()
	s, _ := scripted.Parse([]byte("turns:\n  - tool_calls: [{name: add, input: {a: 1, b: 2}}]\n  - answer: It is 3.\n"), "turns.yaml")
	tools := []agent.Tool{addTool("Adds two numbers.")}
	recorded := (&agent.Executor{Tracer: trace.New(trace.Options{})}).Run(ctx,
		&agent.ReAct{Model: s.NewModel(), Tools: agent.NewToolbox(tools...), System: "You add."}, "1 + 2?")

	rec, err := replay.Load(recorded.Records) // or the records of a stored trace
	if err != nil {
		fmt.Println(err) // the trace cannot be replayed faithfully, and says why
		return
	}
	for _, system := range []string{"You add.", "You add numbers."} {
		rp, _ := replay.New(rec, replay.Options{})
		loop := &agent.ReAct{
			Model:  rp.Model(),        // answers from the recording
			Tools:  rp.Stub(tools...), // the tools' current definitions, results from the recording
			System: system,
		}
		res := (&agent.Executor{}).Run(ctx, loop, rec.Input)
		if d := rp.Finish(res); d != nil {
			fmt.Println(d)
		} else {
			fmt.Printf("%q replays exactly: %s\n", system, res.Answer)
		}
	}
	// Output:
	// "You add." replays exactly: It is 3.
	// replay diverged at step 1, model call 1: the model was asked with other messages
	//   message 1 (system): content differs:
	//     - recorded: "You add."
	//     + replayed: "You add numbers."
}

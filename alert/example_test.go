package alert_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/store/sqlite"
)

// A program registers a metric of its own (here, how many records an
// online rule dropped) and watches it with a monitor; Evaluate is what
// Run calls at each tick of the engine's clock.
func ExampleEngine_Register() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "loupe-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loupe.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := alert.New(alert.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	dropped := 12.0
	e.Register("rule_drops", func(ctx context.Context, window time.Duration) (float64, error) { return dropped, nil })
	err = e.Put(ctx, alert.Monitor{Name: "drops", Metric: "rule_drops", Window: alert.Duration(5 * time.Minute), Threshold: 10, Resolve: ptr(2.0)})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for _, v := range []float64{12, 5, 1} { // over; in the band; under the resolve threshold
		dropped = v
		if err := e.Evaluate(ctx, now); err != nil {
			panic(err)
		}
		sts, _ := e.Statuses(ctx)
		fmt.Printf("%s: %s at %v\n", sts[0].Monitor.Name, sts[0].State, *sts[0].Value)
		now = now.Add(time.Minute)
	}
	// Output:
	// drops: firing at 12
	// drops: firing at 5
	// drops: ok at 1
}

func ptr[T any](v T) *T { return &v }

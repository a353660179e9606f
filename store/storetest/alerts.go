package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// listOnly hides every optional interface of a store but Store itself, so
// that store.Window takes its fallback: the reference WindowStats is
// checked against.
type listOnly struct{ store.Store }

// testWindowStats checks a store's WindowStats (if it has it) against
// the listing-walking fallback of store.Window, over windows and filters.
func testWindowStats(t *testing.T, s store.Store) {
	ws, ok := s.(store.WindowStater)
	if !ok {
		t.Skip("the store does not implement store.WindowStater")
	}
	ctx := context.Background()
	ids := corpus(t, s, 40)
	for i, q := range []store.WindowQuery{
		{},
		{Filter: store.Filter{Since: t0.Add(10 * time.Minute), Until: t0.Add(30 * time.Minute)}, Sample: 5, SampleBy: store.SampleErrors},
		{Filter: store.Filter{Name: "alpha"}, Sample: 3, SampleBy: store.SampleDuration},
		{Filter: store.Filter{Tags: []string{"env:ci"}}, Sample: 4, SampleBy: store.SampleTokens},
		{Filter: store.Filter{Since: t0.Add(time.Hour)}, Sample: 3},
		{Filter: store.Filter{Tool: "calc", HasErrors: true}, Sample: 20, SampleBy: store.SampleCost},
	} {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			got, err := ws.WindowStats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := store.Window(ctx, listOnly{s}, q)
			if err != nil {
				t.Fatal(err)
			}
			if got.Traces != want.Traces || got.ErrorTraces != want.ErrorTraces || got.InputTokens != want.InputTokens ||
				got.OutputTokens != want.OutputTokens || got.P95 != want.P95 || !near(got.CostUSD, want.CostUSD) {
				t.Errorf("WindowStats = %+v\nwant (from the listing) %+v", got, want)
			}
			// Ties in the order may pick other traces; the sample must be
			// as long and drawn from the window.
			if len(got.Sample) != len(want.Sample) {
				t.Errorf("sample %v, want %d ids like %v", got.Sample, len(want.Sample), want.Sample)
			}
			for _, id := range got.Sample {
				if !slices.Contains(ids, id) {
					t.Errorf("sample id %s is not a stored trace", id)
				}
			}
			if q.SampleBy == store.SampleErrors || q.SampleBy == "" {
				if !slices.Equal(got.Sample, want.Sample) {
					t.Errorf("sample %v, want %v", got.Sample, want.Sample)
				}
			}
		})
	}
	if _, err := ws.WindowStats(ctx, store.WindowQuery{Sample: store.MaxSample + 1}); err == nil {
		t.Error("a sample over MaxSample was accepted")
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

// testAlerts checks store.Alerts: one open firing per monitor (also under
// concurrent openers, as collectors sharing a store are), resolution
// once, and deliveries returned with their firing.
func testAlerts(t *testing.T, s store.Store) {
	al, ok := s.(store.Alerts)
	if !ok {
		t.Skip("the store does not implement store.Alerts")
	}
	ctx := context.Background()
	tid := trace.NewTraceID()
	f := store.Firing{ID: hexID(1), Monitor: "errors", Metric: "error_rate", Filter: "tag:env:prod", Started: t0, Value: 0.5, Threshold: 0.2,
		Window: 5 * time.Minute, TraceIDs: []trace.TraceID{tid}}
	got, opened, err := al.OpenFiring(ctx, f)
	if err != nil || !opened || got.ID != f.ID {
		t.Fatalf("OpenFiring = %+v, %v, %v; want it opened", got, opened, err)
	}
	// A second collector, a little later, with its own id.
	g := f
	g.ID, g.Started = hexID(2), t0.Add(10*time.Second)
	got, opened, err = al.OpenFiring(ctx, g)
	if err != nil || opened || got.ID != f.ID {
		t.Fatalf("second OpenFiring = %+v, %v, %v; want the first firing, not opened", got.ID, opened, err)
	}
	for i, ev := range []string{store.AlertFiring, store.AlertFiring} {
		d := store.Delivery{FiringID: f.ID, Event: ev, Target: "https://hooks.example.com/…", Attempt: i + 1, Time: t0.Add(time.Duration(i) * time.Second), Status: []int{500, 200}[i], OK: i == 1}
		if i == 0 {
			d.Error = "HTTP 500"
		}
		if err := al.AddDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := al.AddDelivery(ctx, store.Delivery{FiringID: "nothex", Event: "firing", Attempt: 1, Time: t0}); err == nil {
		t.Error("a delivery with a bad firing id was stored")
	}
	ok, err = al.ResolveFiring(ctx, f.ID, t0.Add(time.Minute), 0.05)
	if err != nil || !ok {
		t.Fatalf("ResolveFiring = %v, %v", ok, err)
	}
	if ok, err := al.ResolveFiring(ctx, f.ID, t0.Add(2*time.Minute), 0.01); err != nil || ok {
		t.Errorf("second ResolveFiring = %v, %v; want false (already resolved)", ok, err)
	}
	list, err := al.Firings(ctx, store.FiringFilter{Monitor: "errors"})
	if err != nil || len(list) != 1 {
		t.Fatalf("Firings = %+v, %v", list, err)
	}
	fi := list[0]
	if !fi.Started.Equal(t0) || !fi.Resolved.Equal(t0.Add(time.Minute)) || fi.ResolvedValue != 0.05 || fi.Value != 0.5 || fi.Threshold != 0.2 ||
		fi.Window != 5*time.Minute || fi.Filter != f.Filter || fi.Metric != f.Metric || !slices.Equal(fi.TraceIDs, f.TraceIDs) {
		t.Errorf("stored firing %+v\nwant %+v", fi, f)
	}
	if len(fi.Deliveries) != 2 || fi.Deliveries[0].Status != 500 || fi.Deliveries[0].Error != "HTTP 500" || fi.Deliveries[0].OK ||
		!fi.Deliveries[1].OK || fi.Deliveries[1].Attempt != 2 {
		t.Errorf("deliveries %+v", fi.Deliveries)
	}

	// Resolved, the monitor may fire again; racing openers open it once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := range 8 {
		wg.Go(func() {
			h := f
			h.ID, h.Started = hexID(10+i), t0.Add(time.Hour+time.Duration(i)*time.Millisecond)
			got, opened, err := al.OpenFiring(ctx, h)
			if err != nil {
				t.Errorf("OpenFiring %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if opened {
				winners = append(winners, got.ID)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d of 8 concurrent openers opened a firing (%v); want 1", len(winners), winners)
	}
	open, err := al.Firings(ctx, store.FiringFilter{Open: true})
	if err != nil || len(open) != 1 || open[0].ID != winners[0] || !open[0].Resolved.IsZero() {
		t.Errorf("open firings %+v, %v; want only %s", open, err, winners[0])
	}
	all, err := al.Firings(ctx, store.FiringFilter{Limit: 1})
	if err != nil || len(all) != 1 || all[0].ID != winners[0] {
		t.Errorf("newest firing %+v, %v; want %s", all, err, winners[0])
	}
	bad := f
	bad.ID = "short"
	if _, _, err := al.OpenFiring(ctx, bad); err == nil {
		t.Error("a firing with a bad id was stored")
	}
}

func hexID(n int) string { return fmt.Sprintf("%032x", n) }

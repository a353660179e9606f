package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/store"
)

// TestMonitorsAPI: definitions through the API (admin keys), read back
// with their state (read keys), webhook URLs redacted; firings with
// their deliveries and links at /api/v1/alerts.
func TestMonitorsAPI(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	st := openStore(t)
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeRead, ScopeAdmin, ScopeIngest} {
		k, _, err := CreateKey(ctx, st, sc, string(sc), now)
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = k
	}
	const hook = `{"url":"https://hooks.slack.com/services/T0/B0/SECRETSECRET","format":"slack"}`
	def := `{"name":"prod-errors","metric":"error_rate","filter":"tag:env:prod","window":"5m","threshold":0.2,"resolve":0.1,"for":2,"webhooks":[` + hook + `]}`
	for _, tc := range []struct {
		key, method, path, body string
		code                    int
		want                    string
	}{
		{keys[ScopeRead], "GET", "/api/v1/monitors", "", 200, `{"monitors":[]}`},
		{keys[ScopeIngest], "GET", "/api/v1/monitors", "", 403, ""},
		{keys[ScopeRead], "POST", "/api/v1/monitors", def, 403, ""},
		{keys[ScopeIngest], "POST", "/api/v1/monitors", def, 403, ""},
		{"", "GET", "/api/v1/alerts", "", 401, ""},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", def, 201, `"state":"unknown"`},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", def, 409, "exists"},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", `{"name":"x","metric":"error_rate","window":"5m","threshold":1,"resolve":2}`, 400, `"field":"resolve"`},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", `{"name":"x","metric":"error_rate","window":"soon"}`, 400, "want a duration"},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", `{"name":"x","metric":"error_rate","window":"5m","colour":1}`, 400, "unknown field"},
		{keys[ScopeAdmin], "POST", "/api/v1/monitors", `{"name":"x","metric":"cost","window":"5m","filter":"free text"}`, 400, `"field":"filter"`},
		{keys[ScopeRead], "GET", "/api/v1/monitors", "", 200, `"url":"https://hooks.slack.com/services/…"`},
		{keys[ScopeRead], "PUT", "/api/v1/monitors/prod-errors", def, 403, ""},
		{keys[ScopeAdmin], "PUT", "/api/v1/monitors/other", def, 400, "differs from the path"},
		{keys[ScopeAdmin], "PUT", "/api/v1/monitors/spend", `{"metric":"cost","window":"1d","threshold":50}`, 200, `"name":"spend"`},
		{keys[ScopeRead], "DELETE", "/api/v1/monitors/spend", "", 403, ""},
		{keys[ScopeAdmin], "DELETE", "/api/v1/monitors/spend", "", 204, ""},
		{keys[ScopeAdmin], "DELETE", "/api/v1/monitors/spend", "", 404, "no monitor"},
		{keys[ScopeAdmin], "PATCH", "/api/v1/monitors/spend", "", 405, "allowed: PUT, DELETE"},
		{keys[ScopeRead], "GET", "/api/v1/alerts", "", 200, `{"firings":[]}`},
		{keys[ScopeRead], "GET", "/api/v1/alerts?limit=0", "", 400, "limit"},
	} {
		e.key = tc.key
		var body []byte
		ctype := ""
		if tc.body != "" {
			body, ctype = []byte(tc.body), "application/json"
		}
		code, b, _ := e.do(tc.method, tc.path, ctype, body)
		if code != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %s %s (%.8s): %d %s, want %d with %q", tc.method, tc.path, tc.body, tc.key, code, b, tc.code, tc.want)
		}
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("%s %s answers the webhook's secret: %s", tc.method, tc.path, b)
		}
	}
	// The definition is in the store's settings, for every collector.
	if m, err := st.(store.Settings).Settings(ctx, "monitor:"); err != nil || !strings.Contains(m["monitor:prod-errors"], "SECRETSECRET") {
		t.Errorf("stored definitions %v, %v", m, err)
	}

	// A firing, as an engine (another collector's) stores it.
	al := st.(store.Alerts)
	fired := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	f := store.Firing{ID: strings.Repeat("ab", 16), Monitor: "prod-errors", Metric: "error_rate", Filter: "tag:env:prod has:errors", Started: fired, Value: 0.5,
		Threshold: 0.2, Window: 5 * time.Minute}
	if _, _, err := al.OpenFiring(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := al.AddDelivery(ctx, store.Delivery{FiringID: f.ID, Event: "firing", Target: alert.RedactURL("https://hooks.slack.com/services/T0/B0/SECRETSECRET"), Attempt: 1, Time: fired, Status: 200, OK: true}); err != nil {
		t.Fatal(err)
	}
	e.key = keys[ScopeRead]
	code, b, _ := e.do("GET", "/api/v1/alerts?monitor=prod-errors&open=true", "", nil)
	var got AlertsJSON
	if code != 200 || json.Unmarshal(b, &got) != nil || len(got.Firings) != 1 {
		t.Fatalf("alerts: %d %s", code, b)
	}
	fj := got.Firings[0]
	if fj.ID != f.ID || len(fj.Deliveries) != 1 || !fj.Deliveries[0].OK ||
		fj.RunsLink != "#/runs?errors=true&since=2026-03-02T08%3A55%3A00Z&tag=env%3Aprod&until=2026-03-02T09%3A00%3A00.000000001Z" {
		t.Errorf("firing %+v", fj)
	}
	code, b, _ = e.do("GET", "/api/v1/monitors", "", nil)
	if code != 200 || !strings.Contains(string(b), `"state":"firing"`) {
		t.Errorf("monitors with an open firing: %d %s", code, b)
	}
	// Deleting the monitor closes its firing, which stays listed.
	e.key = keys[ScopeAdmin]
	if code, b, _ := e.do("DELETE", "/api/v1/monitors/prod-errors", "", nil); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if open, err := al.Firings(ctx, store.FiringFilter{Open: true}); err != nil || len(open) != 0 {
		t.Errorf("open firings after the monitor was deleted: %+v, %v", open, err)
	}
	if code, b, _ := e.do("GET", "/api/v1/alerts", "", nil); code != 200 || !strings.Contains(string(b), f.ID) {
		t.Errorf("alerts after the monitor was deleted: %d %s", code, b)
	}
}

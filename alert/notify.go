package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/retry"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Notification is the body a webhook of format "json" receives, once when
// a monitor fires and once when it resolves.
type Notification struct {
	Monitor   string   `json:"monitor"`
	State     string   `json:"state"` // "firing" or "resolved"
	Metric    string   `json:"metric"`
	Filter    string   `json:"filter,omitempty"`
	Value     *float64 `json:"value"` // the value that fired or resolved it; null when the window had none
	Op        string   `json:"op"`
	Threshold float64  `json:"threshold"`
	Resolve   float64  `json:"resolve_threshold"`
	Window    string   `json:"window"` // a Go duration
	// Time is when it fired or resolved; Started when it fired.
	Time    time.Time `json:"time"`
	Started time.Time `json:"started"`
	// FiringID identifies the firing in GET /api/v1/alerts.
	FiringID string `json:"firing_id"`
	// Link opens the runs of the window in the web UI.
	Link string `json:"link"`
	// TraceIDs are a sample of the runs that caused it (at most
	// store.MaxSample).
	TraceIDs []trace.TraceID `json:"trace_ids"`
}

// RunsLink returns the web UI route of the runs list that a firing's
// value was taken over: its monitor's filter, over the window that ended
// when it fired. Filters the runs list does not take (durations) are left
// out. The route is relative ("#/runs?…"); prefix the UI's URL.
func RunsLink(f *store.Firing) string {
	p := url.Values{}
	p.Set("since", f.Started.Add(-f.Window).UTC().Format(time.RFC3339Nano))
	p.Set("until", f.Started.Add(1).UTC().Format(time.RFC3339Nano))
	if q, err := store.ParseQueryAt(f.Filter, f.Started); err == nil {
		for k, v := range map[string]string{"name": q.Name, "status": q.Status, "model": q.Model, "tool": q.Tool} {
			if v != "" {
				p.Set(k, v)
			}
		}
		for _, t := range q.Tags {
			p.Add("tag", t)
		}
		if q.HasErrors {
			p.Set("errors", "true")
		}
	}
	return "#/runs?" + p.Encode()
}

// TraceLink returns the web UI route of one trace.
func TraceLink(id trace.TraceID) string { return "#/run/" + id.String() }

// uiLink is the web UI's page frag (a "#/…" fragment) under base; a base
// with a query (a project's, "http://h/?project=a") keeps it.
func uiLink(base, frag string) string {
	if strings.Contains(base, "?") {
		return base + frag
	}
	return strings.TrimSuffix(base, "/") + "/" + frag
}

func (e *Engine) notification(m *Monitor, f store.Firing, event string, value float64, now time.Time) Notification {
	n := Notification{Monitor: m.Name, State: event, Metric: m.Metric, Filter: m.Filter, Op: m.op(), Threshold: m.Threshold,
		Resolve: m.resolveAt(), Window: time.Duration(m.Window).String(), Time: now.UTC(), Started: f.Started.UTC(), FiringID: f.ID,
		Link: uiLink(e.o.UIURL, RunsLink(&f)), TraceIDs: f.TraceIDs}
	if e.o.UIURL == "" {
		n.Link = RunsLink(&f)
	}
	if !math.IsNaN(value) {
		n.Value = &value
	}
	if n.TraceIDs == nil {
		n.TraceIDs = []trace.TraceID{}
	}
	return n
}

// SlackBody returns n as Slack's incoming webhooks take it: a text (the
// fallback of notifications) and blocks.
func SlackBody(n *Notification) ([]byte, error) {
	icon := ":red_circle:"
	verb := "is firing"
	if n.State == store.AlertResolved {
		icon, verb = ":large_green_circle:", "resolved"
	}
	val := "no value"
	if n.Value != nil {
		val = formatValue(*n.Value)
	}
	text := fmt.Sprintf("%s Loupe monitor %s %s: %s = %s (threshold %s %s, window %s)", icon, n.Monitor, verb, n.Metric, val, n.Op, formatValue(n.Threshold), n.Window)
	detail := fmt.Sprintf("*%s* %s\n`%s` = *%s* (threshold %s %s, resolves past %s) over %s", slackEscape(n.Monitor), verb, slackEscape(n.Metric), val,
		slackEscape(n.Op), formatValue(n.Threshold), formatValue(n.Resolve), n.Window)
	if n.Filter != "" {
		detail += "\nfilter: `" + slackEscape(n.Filter) + "`"
	}
	blocks := []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": detail}},
	}
	if strings.HasPrefix(n.Link, "http://") || strings.HasPrefix(n.Link, "https://") {
		blocks = append(blocks, map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "<" + n.Link + "|Open the runs in Loupe>"}})
	}
	if len(n.TraceIDs) > 0 {
		ids := make([]string, 0, 5)
		for i, id := range n.TraceIDs {
			if i == 5 {
				break
			}
			ids = append(ids, "`"+id.String()+"`")
		}
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
			map[string]any{"type": "mrkdwn", "text": "runs: " + strings.Join(ids, " ")},
		}})
	}
	return json.Marshal(map[string]any{"text": text, "blocks": blocks})
}

func formatValue(v float64) string { return fmt.Sprintf("%.4g", v) }

// slackEscape escapes the characters Slack's mrkdwn gives a meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// notify starts the delivery of event to every webhook of m.
func (e *Engine) notify(m *Monitor, f store.Firing, event string, value float64, now time.Time) {
	n := e.notification(m, f, event, value, now)
	for _, h := range m.Webhooks {
		var body []byte
		var err error
		if h.Format == "slack" {
			body, err = SlackBody(&n)
		} else {
			body, err = json.Marshal(n)
		}
		if err != nil {
			e.log.Error("alert: encoding a notification", "monitor", m.Name, "err", err)
			continue
		}
		// A webhook hears of a firing's resolution only after the
		// delivery of the firing itself is over (delivered or given up),
		// so that it never gets them out of order.
		key := f.ID + "\x00" + h.URL
		done := make(chan struct{})
		e.mu.Lock()
		prev := e.inFlight[key]
		if event == store.AlertFiring {
			e.inFlight[key] = done
		} else {
			delete(e.inFlight, key)
		}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer close(done)
			if prev != nil {
				select {
				case <-prev:
				case <-e.ctx.Done():
					return
				}
			}
			e.deliver(h.URL, f.ID, event, m.Name, body)
			e.mu.Lock()
			if e.inFlight[key] == done {
				delete(e.inFlight, key) // over: a resolution need not wait
			}
			e.mu.Unlock()
		}()
	}
}

// deliver posts body to hook until it is accepted or the attempts run
// out, storing every attempt.
func (e *Engine) deliver(hook, firingID, event, monitor string, body []byte) {
	target := RedactURL(hook)
	p := retry.Policy{Attempts: e.o.Attempts, MinBackoff: e.o.MinBackoff, MaxBackoff: e.o.MaxBackoff}
	err := p.Do(e.ctx, func(n int) error {
		status, retryAfter, err := e.post(hook, body)
		d := store.Delivery{FiringID: firingID, Event: event, Target: target, Attempt: n, Time: e.clock.Now(), Status: status, OK: err == nil}
		if err != nil {
			d.Error = err.Error()
		}
		// The record of an attempt is written even while the engine
		// closes, bounded.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 10*time.Second)
		if serr := e.al.AddDelivery(sctx, d); serr != nil {
			e.log.Error("alert: storing a delivery", "monitor", monitor, "target", target, "err", serr)
		}
		cancel()
		if err != nil && (status == 0 || status == http.StatusTooManyRequests || status >= 500) {
			return retry.Later(err, retryAfter)
		}
		return err
	})
	if err != nil {
		e.log.Error("alert: webhook not notified", "monitor", monitor, "event", event, "target", target, "err", err)
	}
}

// post makes one attempt. Its errors never hold the URL, which may carry
// a secret.
func (e *Engine) post(hook string, body []byte) (status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return 0, 0, errors.New("the webhook URL is malformed")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "loupe-alert/1")
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) && e.ctx.Err() == nil {
			return 0, 0, fmt.Errorf("no answer within %s", e.o.Timeout)
		}
		return 0, 0, fmt.Errorf("POST failed: %v", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, 0, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, 0, fmt.Errorf("HTTP %d: the webhook redirects, and redirects are not followed; set its final URL", resp.StatusCode)
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(snippet), ""))
	if msg != "" {
		msg = ": " + store.ClipAlertText(msg)
	}
	return resp.StatusCode, retry.ParseAfter(resp.Header.Get("Retry-After")), fmt.Errorf("HTTP %d%s", resp.StatusCode, msg)
}

package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// testSearchSpans: an OTLP span's companion record is found by its
// attribute values (otlp.SpanText), with the value as its snippet, and
// not by the OTLP document around them.
func testSearchSpans(t *testing.T, s store.Store) {
	ctx := context.Background()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout-svc")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("handle order")
	sp.SetTraceID(pcommon.TraceID{0x5a, 1})
	sp.SetSpanID(pcommon.SpanID{0x5a, 2})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
	sp.Attributes().PutStr("customer.tier", "platinum-7731")
	sp.Attributes().PutInt("order.items", 424242)
	recs := otlp.Map(td, nil).Records
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		q       string
		hits    int
		snippet string
	}{
		{"platinum", 1, "platinum-7731"},
		{"424242", 1, "424242"},
		{"stringValue", 0, ""},
		{"checkout", 0, ""},  // the resource is not searched
		{"5a01", 0, ""},      // nor the ids
		{"otel span", 0, ""}, // nor the companion's own name
		{"handle order", 1, "handle order"},
	} {
		q, err := store.ParseQuery(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		page, err := s.Search(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", tt.q, err)
		}
		var comp []store.Hit
		for _, h := range page.Hits {
			if h.Type == trace.TypeCustom && h.Name == otlp.SpanRecordName {
				comp = append(comp, h)
			}
		}
		if len(comp) != tt.hits {
			t.Errorf("%s: %d companion hits, want %d: %+v", tt.q, len(comp), tt.hits, page.Hits)
			continue
		}
		if tt.hits > 0 && (comp[0].Field != "output" || !strings.Contains(comp[0].Snippet, tt.snippet)) {
			t.Errorf("%s: hit %+v, want field output with %q", tt.q, comp[0], tt.snippet)
		}
	}
}

// testSearchTokens: text is found by its runs of letters and digits on
// every backend, whatever punctuation joins them (ids, URLs, paths,
// decimals, addresses), as a query is split, and with or without the
// diacritics of Latin letters (é is e), as SQLite's FTS5 reads text.
func testSearchTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	recs := Gen(Spec{Name: "tokens", Start: t0, Tool: "notify"})
	ends := 0
	for i := range recs {
		if recs[i].Type == trace.TypeToolEnd {
			ends++
			recs[i].Output = trace.Text("order cust-4711 sent to https://api.example.com/v1/orders?id=17, total 3.14 EUR; log /var/log/app.log; mail ops@example.org; v2.0.1-rc; Café Naïve in Łódź, Ærøskøbing")
		}
	}
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"4711", "cust-4711", "CUST 4711", `"cust 4711"`, "example", "api.example.com", `"example com v1 orders"`, "17", "3.14", "14", "app.log", "var", "ops", "ops@example.org", "rc", "v2.0.1-rc",
		"cafe", "CAFÉ", `"cafe naive"`, "łodz", "Łódź", "ærøskøbing"} {
		pq, err := store.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		page, err := s.Search(ctx, pq)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if len(page.Hits) != ends || page.Hits[0].Type != trace.TypeToolEnd || page.Hits[0].Field != "output" {
			t.Errorf("%s: hits %+v, want the %d tool.end records' output", q, page.Hits, ends)
		}
	}
	for _, q := range []string{"4712", `"4711 cust"`, "exampl", "lodz", "aeroskobing"} { // ł, æ and ø are letters of their own
		pq, _ := store.ParseQuery(q)
		if page, err := s.Search(ctx, pq); err != nil || len(page.Hits) != 0 {
			t.Errorf("%s: %d hits, %v; want none", q, len(page.Hits), err)
		}
	}
}

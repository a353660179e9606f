package otlp

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loupe-dev/loupe/trace"
)

// The attributes that name a span's session and user, in the order they
// are looked for: OpenTelemetry's (session.id, user.id, which
// OpenInference uses too), the GenAI conventions' conversation id, and
// Langfuse's own. A span's attributes are looked at before its
// resource's.
var (
	sessionKeys = []string{"session.id", "gen_ai.conversation.id", "langfuse.session.id"}
	userKeys    = []string{"user.id", "langfuse.user.id"}
)

// Export attributes of a record's session and user (RunInfo.Session,
// RunInfo.User) on the span it starts.
const (
	AttrSession = "session.id"
	AttrUser    = "user.id"
)

// withSession sets the session and user that the span sp (of resource
// res) names on the first of its records, recs[from:], and returns recs.
// A store takes a trace's session and user from the first record that
// carries one, so a session named on a child span or on the resource
// reaches the trace as well as one on the root span.
func withSession(recs []trace.Record, from int, res, sp pcommon.Map) []trace.Record {
	if from >= len(recs) {
		return recs
	}
	r := &recs[from]
	session := trace.BoundID(idAttr(sessionKeys, sp, res))
	user := trace.BoundID(idAttr(userKeys, sp, res))
	if session != r.Session() || user != r.User() {
		ri := r.EditRun()
		ri.Session, ri.User = session, user
	}
	return recs
}

// idAttr returns the first non-empty value of keys in maps, in order.
func idAttr(keys []string, maps ...pcommon.Map) string {
	for _, m := range maps {
		for _, k := range keys {
			if v, ok := m.Get(k); ok {
				if s := v.AsString(); s != "" {
					return s
				}
			}
		}
	}
	return ""
}

// putSession writes r's session and user as the attributes AttrSession
// and AttrUser.
func putSession(a pcommon.Map, r *trace.Record) {
	if s := r.Session(); s != "" {
		a.PutStr(AttrSession, s)
	}
	if u := r.User(); u != "" {
		a.PutStr(AttrUser, u)
	}
}

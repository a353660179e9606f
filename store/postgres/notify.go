package postgres

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Commit notices (store.CommitWatcher). A Store keeps the identities
// (trace id, seq) of the records it commits and, notifyEvery after a
// commit, sends them on the store's channel with NOTIFY, the commits of
// that while coalesced into one transaction. PostgreSQL serializes the
// commits of the transactions that notify, cluster-wide, holding a lock
// until their commit is flushed: notifying from every ingest transaction
// would make concurrent ingest commit one at a time (BenchmarkNotify),
// while a notifying transaction every notifyEvery costs ingest nothing.
// The notice is sent after the commit, so the records it names can be
// read when it arrives; a process that dies in between leaves its last
// commits untold (they are in the store, and streams that start again
// read them). A payload is text:
//
//	1 <origin>
//	<trace id, 32 hex digits> <from>[-<to>][,<from>[-<to>]]…
//	…
//
// origin being 16 hex digits that each Store value draws when it is
// opened, so that a watcher skips its own Store's commits. NOTIFY payloads
// are limited to 8000 bytes: many traces are told in several payloads,
// each of at most maxPayload bytes, and a trace's seqs as at most
// maxRanges ranges (the last one widened to hold the rest). A Store that
// could not tell some of its commits (more than maxPending records waiting,
// or NOTIFY failed) sends the payload "1 <origin>\nlost" first, and the
// watchers that receive it say that notices were lost.
//
// The channel is per schema ("loupe " and the schema's name, or a hash of
// a long one), since a store is a schema and notifications go to the
// whole database. A watcher listens on a connection of its own, outside
// the pool, named "loupe listen" (application_name); it checks the
// connection every idleCheck by listening again, and after losing it
// listens again with backoff, then tells its watch that notices may have
// been lost.

const (
	// maxPayload bounds the bytes of one NOTIFY payload (PostgreSQL
	// refuses 8000 or more).
	maxPayload = 7900
	// maxRanges bounds the seq ranges of one trace in a payload.
	maxRanges = 64
	// notifyEvery is how long after a commit its notice is sent, the
	// commits of that while told together.
	notifyEvery = 50 * time.Millisecond
	// maxPending bounds the records committed but not yet told.
	maxPending = 1 << 16
	// noticeQueue bounds the notices received but not yet handed to
	// CommitWatch.Commit; more are dropped, and Lost is called.
	noticeQueue = 256
	// idleCheck is how long a listener waits for a notification before
	// it makes sure its connection is alive.
	idleCheck = 30 * time.Second
	// minBackoff and maxBackoff bound the wait before listening again.
	minBackoff, maxBackoff = 100 * time.Millisecond, 10 * time.Second
	// listenerName is the application_name of the listening connection.
	listenerName = "loupe listen"
)

var _ store.CommitWatcher = (*Store)(nil)

// newOrigin returns a random origin: 16 hex digits.
func newOrigin() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// channelFor returns the notification channel of the store in schema.
func channelFor(schema string) string {
	// Channel names are identifiers: at most 63 bytes.
	if len(schema) <= 57 && strings.IndexFunc(schema, func(r rune) bool { return r < ' ' || r > '~' }) < 0 {
		return "loupe " + schema
	}
	h := sha256.Sum256([]byte(schema))
	return "loupe " + hex.EncodeToString(h[:16])
}

// encodeNotices returns the payloads naming rows, which are sorted by
// (trace id, seq) without duplicates.
func encodeNotices(origin string, rows []key) []string {
	var out []string
	head := "1 " + origin
	var b strings.Builder
	var line []byte
	flush := func() {
		if b.Len() > len(head) {
			out = append(out, b.String())
		}
		b.Reset()
		b.WriteString(head)
	}
	b.WriteString(head)
	for i := 0; i < len(rows); {
		id := rows[i].id
		var ranges []store.SeqRange
		for ; i < len(rows) && rows[i].id == id; i++ {
			seq := rows[i].seq
			switch n := len(ranges); {
			case n > 0 && (seq == ranges[n-1].To+1 || n == maxRanges):
				ranges[n-1].To = seq
			default:
				ranges = append(ranges, store.SeqRange{From: seq, To: seq})
			}
		}
		line = appendTraceLine(line[:0], id, ranges)
		if b.Len()+1+len(line) > maxPayload {
			flush()
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	flush()
	return out
}

func appendTraceLine(b []byte, id trace.TraceID, ranges []store.SeqRange) []byte {
	b = hex.AppendEncode(b, id[:])
	for i, r := range ranges {
		if i == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, r.From, 10)
		if r.To != r.From {
			b = append(b, '-')
			b = strconv.AppendUint(b, r.To, 10)
		}
	}
	return b
}

// decodeNotice reads a payload that encodeNotices wrote. Anything else
// (anyone who may connect may notify on the channel) is refused with an
// error saying what is wrong.
// lost is true for the payload "1 <origin>\nlost".
func decodeNotice(payload string) (origin string, n store.CommitNotice, lost bool, err error) {
	if len(payload) > 8000 {
		return "", n, false, fmt.Errorf("commit notice of %d bytes: longer than PostgreSQL allows", len(payload))
	}
	lines := strings.Split(payload, "\n")
	v, origin, ok := strings.Cut(lines[0], " ")
	if !ok || v != "1" {
		return "", n, false, fmt.Errorf("commit notice %.40q: want a first line \"1 <origin>\"", lines[0])
	}
	if len(origin) != 16 || !isHex(origin) {
		return "", n, false, fmt.Errorf("commit notice: origin %.40q is not 16 hex digits", origin)
	}
	if len(lines) == 2 && lines[1] == "lost" {
		return origin, n, true, nil
	}
	for i, l := range lines[1:] {
		ct, err := decodeTraceLine(l)
		if err != nil {
			return "", store.CommitNotice{}, false, fmt.Errorf("commit notice line %d: %w", i+2, err)
		}
		n.Traces = append(n.Traces, ct)
	}
	return origin, n, false, nil
}

func decodeTraceLine(l string) (store.CommitTrace, error) {
	var ct store.CommitTrace
	hx, list, ok := strings.Cut(l, " ")
	if !ok {
		return ct, fmt.Errorf("%.80q: want a trace id, a space and seq ranges", l)
	}
	id, err := trace.ParseTraceID(hx)
	if err != nil || len(hx) != 32 || id.IsZero() {
		return ct, fmt.Errorf("trace id %.40q: want 32 hex digits, not all zero", hx)
	}
	ct.TraceID = id
	parts := strings.Split(list, ",")
	if len(parts) > maxRanges {
		return ct, fmt.Errorf("trace %s: %d seq ranges, at most %d", id, len(parts), maxRanges)
	}
	for _, p := range parts {
		f, t, wide := strings.Cut(p, "-")
		from, err1 := parseSeq(f)
		to := from
		var err2 error
		if wide {
			to, err2 = parseSeq(t)
		}
		switch {
		case err1 != nil || err2 != nil:
			return ct, fmt.Errorf("trace %s: seq range %.50q: want <from>[-<to>] of seqs from 1 to %d", id, p, int64(math.MaxInt64))
		case to < from:
			return ct, fmt.Errorf("trace %s: seq range %q ends before it starts", id, p)
		case len(ct.Seqs) > 0 && from <= ct.Seqs[len(ct.Seqs)-1].To:
			return ct, fmt.Errorf("trace %s: seq range %q is not after the one before it", id, p)
		}
		ct.Seqs = append(ct.Seqs, store.SeqRange{From: from, To: to})
	}
	return ct, nil
}

func parseSeq(s string) (uint64, error) {
	if s == "" || s[0] == '+' || (len(s) > 1 && s[0] == '0') {
		return 0, errors.New("not a seq")
	}
	v, err := strconv.ParseUint(s, 10, 63)
	if err != nil || v == 0 {
		return 0, errors.New("not a seq")
	}
	return v, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// notices are the records a Store committed and has not told yet.
type notices struct {
	mu      sync.Mutex
	pending []key
	lost    bool          // some were not told
	wake    chan struct{} // 1-buffered: something to tell
}

// committed notes rows, just committed, for the next notice.
func (s *Store) committed(rows []*trace.Record) {
	if s.silent || len(rows) == 0 {
		return
	}
	n := &s.notices
	n.mu.Lock()
	if len(n.pending)+len(rows) > maxPending {
		n.lost = true
	} else {
		for _, r := range rows {
			n.pending = append(n.pending, key{r.TraceID, r.Seq})
		}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// notify sends the notices, notifyEvery after a commit, until the store
// is closed (when it sends the last ones).
func (s *Store) notify() {
	defer s.bg.Done()
	for {
		select {
		case <-s.closing.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.sendNotices(ctx)
			cancel()
			return
		case <-s.notices.wake:
		}
		select {
		case <-s.closing.Done():
			continue // the last ones, above
		case <-time.After(notifyEvery):
		}
		ctx, cancel := context.WithTimeout(s.closing, 10*time.Second)
		err := s.sendNotices(ctx)
		cancel()
		if err != nil && s.closing.Err() == nil {
			// Try again (saying that some were lost) after a while.
			select {
			case s.notices.wake <- struct{}{}:
			default:
			}
			select {
			case <-s.closing.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// sendNotices tells the records committed since the last call, in one
// transaction.
func (s *Store) sendNotices(ctx context.Context) error {
	n := &s.notices
	n.mu.Lock()
	keys, lost := n.pending, n.lost
	n.pending, n.lost = nil, false
	n.mu.Unlock()
	if len(keys) == 0 && !lost {
		return nil
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	keys = slices.Compact(keys)
	var batch pgx.Batch
	if lost {
		batch.Queue("SELECT pg_notify($1, $2)", s.channel, "1 "+s.origin+"\nlost")
	}
	for _, p := range encodeNotices(s.origin, keys) {
		batch.Queue("SELECT pg_notify($1, $2)", s.channel, p)
	}
	conn, err := s.db.SQL.Conn(ctx)
	if err == nil {
		// One implicit transaction: one notifying commit.
		err = conn.Raw(func(dc any) error { return dc.(*stdlib.Conn).Conn().SendBatch(ctx, &batch).Close() })
		conn.Close()
	}
	if err != nil {
		n.mu.Lock()
		n.lost = true
		n.mu.Unlock()
	}
	return err
}

// WatchCommits implements store.CommitWatcher with LISTEN on a connection
// of its own (see the comment at the top of notify.go).
func (s *Store) WatchCommits(ctx context.Context, w store.CommitWatch) error {
	if w.Commit == nil {
		return errors.New("postgres store: WatchCommits needs a CommitWatch.Commit")
	}
	s.watchMu.Lock()
	if s.closed {
		s.watchMu.Unlock()
		return fmt.Errorf("postgres store %s: watch commits: the store is closed", s.db.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.closing, cancel)
	s.bg.Add(2)
	s.watchMu.Unlock()

	l := &listener{s: s, w: w, notices: make(chan store.CommitNotice, noticeQueue), lost: make(chan struct{}, 1)}
	conn, err := l.listen(ctx)
	if err != nil {
		err = fmt.Errorf("postgres store %s: listen for commits: %w", s.db.Name, err)
	}
	go func() {
		defer s.bg.Done()
		defer stop()
		defer cancel()
		l.run(ctx, conn)
	}()
	go func() {
		defer s.bg.Done()
		l.deliver(ctx)
	}()
	return err
}

type listener struct {
	s       *Store
	w       store.CommitWatch
	notices chan store.CommitNotice
	lost    chan struct{} // 1-buffered: notices may have been missed
}

// listen connects and listens on the store's channel.
func (l *listener) listen(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg := l.s.cfg.Copy()
	cfg.RuntimeParams["application_name"] = listenerName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, l.s.listenSQL()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func (s *Store) listenSQL() string { return "LISTEN " + pgx.Identifier{s.channel}.Sanitize() }

// run receives notifications on conn (nil: not listening yet) until ctx
// ends, listening again whenever the connection is lost.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer func() {
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(cctx)
			cancel()
		}
	}()
	backoff := minBackoff
	for ctx.Err() == nil {
		if conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			c, err := l.listen(ctx)
			if err != nil {
				l.fail(ctx, fmt.Errorf("postgres store %s: listen for commits: %w (trying again in %s)", l.s.db.Name, err, backoff))
				continue
			}
			conn, backoff = c, minBackoff
			l.signalLost() // what was committed while not listening
		}
		wctx, cancel := context.WithTimeout(ctx, idleCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && pgconn.Timeout(err):
			// Quiet for a while: is the connection still there?
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = conn.Exec(pctx, l.s.listenSQL())
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
		}
		if err != nil {
			l.fail(ctx, fmt.Errorf("postgres store %s: listening for commits: %w (listening again)", l.s.db.Name, err))
			conn.Close(context.Background())
			conn = nil
			continue
		}
		origin, notice, lost, err := decodeNotice(n.Payload)
		if err != nil {
			l.fail(ctx, fmt.Errorf("postgres store %s: channel %q: %w (ignored)", l.s.db.Name, l.s.channel, err))
			continue
		}
		if origin == l.s.origin {
			continue
		}
		if lost {
			l.signalLost()
			continue
		}
		select {
		case l.notices <- notice:
		default:
			l.signalLost() // the watch is too slow: drop, and say so
		}
	}
}

func (l *listener) fail(ctx context.Context, err error) {
	if l.w.Error != nil && ctx.Err() == nil {
		l.w.Error(err)
	}
}

func (l *listener) signalLost() {
	select {
	case l.lost <- struct{}{}:
	default:
	}
}

// deliver hands notices to the watch until ctx ends.
func (l *listener) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			if l.w.Lost != nil {
				l.w.Lost()
			}
		case n := <-l.notices:
			l.w.Commit(n)
		}
	}
}

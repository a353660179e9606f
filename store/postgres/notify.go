package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Commit notices (store.CommitWatcher). Every transaction of Append that
// stores records sends, before it commits, NOTIFY on the store's channel
// with payloads naming them: PostgreSQL delivers them to the listeners
// when, and only if, the transaction commits. A payload is text:
//
//	1 <origin>
//	<trace id, 32 hex digits> <from>[-<to>][,<from>[-<to>]]…
//	…
//
// origin being 16 hex digits that each Store value draws when it is
// opened, so that a watcher skips its own Store's commits. NOTIFY payloads
// are limited to 8000 bytes: a transaction of many traces sends several,
// each of at most maxPayload bytes, and a trace's seqs are told as at most
// maxRanges ranges (the last one widened to hold the rest).
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
func encodeNotices(origin string, rows []*trace.Record) []string {
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
		id := rows[i].TraceID
		var ranges []store.SeqRange
		for ; i < len(rows) && rows[i].TraceID == id; i++ {
			seq := rows[i].Seq
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
func decodeNotice(payload string) (origin string, n store.CommitNotice, err error) {
	if len(payload) > 8000 {
		return "", n, fmt.Errorf("commit notice of %d bytes: longer than PostgreSQL allows", len(payload))
	}
	lines := strings.Split(payload, "\n")
	v, origin, ok := strings.Cut(lines[0], " ")
	if !ok || v != "1" {
		return "", n, fmt.Errorf("commit notice %.40q: want a first line \"1 <origin>\"", lines[0])
	}
	if len(origin) != 16 || !isHex(origin) {
		return "", n, fmt.Errorf("commit notice: origin %.40q is not 16 hex digits", origin)
	}
	for i, l := range lines[1:] {
		ct, err := decodeTraceLine(l)
		if err != nil {
			return "", store.CommitNotice{}, fmt.Errorf("commit notice line %d: %w", i+2, err)
		}
		n.Traces = append(n.Traces, ct)
	}
	return origin, n, nil
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

// queueNotices adds the notifications naming rows to batch, which the
// committing transaction sends.
func (s *Store) queueNotices(batch *pgx.Batch, rows []*trace.Record) {
	for _, p := range encodeNotices(s.origin, rows) {
		batch.Queue("SELECT pg_notify($1, $2)", s.channel, p)
	}
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
	s.watchers.Add(2)
	s.watchMu.Unlock()

	l := &listener{s: s, w: w, notices: make(chan store.CommitNotice, noticeQueue), lost: make(chan struct{}, 1)}
	conn, err := l.listen(ctx)
	if err != nil {
		err = fmt.Errorf("postgres store %s: listen for commits: %w", s.db.Name, err)
	}
	go func() {
		defer s.watchers.Done()
		defer stop()
		defer cancel()
		l.run(ctx, conn)
	}()
	go func() {
		defer s.watchers.Done()
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
		origin, notice, err := decodeNotice(n.Payload)
		if err != nil {
			l.fail(ctx, fmt.Errorf("postgres store %s: channel %q: %w (ignored)", l.s.db.Name, l.s.channel, err))
			continue
		}
		if origin == l.s.origin {
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

package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// selectOnly makes a login role that may only read the tables of dsn's
// schema (USAGE on it, SELECT on its tables), as a replica's users are,
// and returns dsn with that role as its user. The role is dropped when t
// ends.
func selectOnly(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	role := "ro_" + trace.NewSpanID().String()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", dsn); err == nil {
			db.Exec("DROP OWNED BY " + role)
			db.Exec("DROP ROLE " + role)
			db.Close()
		}
	})
	u.User = url.User(role)
	return u.String()
}

func setVersion(t *testing.T, dsn string, v int) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE meta SET value = $1 WHERE key = 'schema_version'", fmt.Sprint(v)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenReadOnly opens stores read-only as a role that may only SELECT:
// it reads what the primary wrote, every write fails saying the store is
// read-only, and stores of another schema version or none are refused as
// they should be.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()

	t.Run("no store", func(t *testing.T) {
		dsn := freshSchema(t)
		for _, open := range []func() (store.Store, error){
			func() (store.Store, error) { return postgres.OpenReadOnly(ctx, dsn) },
			func() (store.Store, error) { return store.OpenReadOnly(ctx, dsn) },
		} {
			if s, err := open(); !errors.Is(err, store.ErrNoStore) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("OpenReadOnly of an empty schema: %v, want ErrNoStore", err)
			}
		}
		db, _ := sql.Open("pgx", dsn)
		defer db.Close()
		var meta bool
		if err := db.QueryRow("SELECT to_regclass('meta') IS NOT NULL").Scan(&meta); err != nil || meta {
			t.Fatalf("OpenReadOnly made a meta table (%v, %v)", meta, err)
		}
	})

	t.Run("current", func(t *testing.T) {
		dsn := freshSchema(t)
		rw := open(t, dsn)
		recs := storetest.Gen(storetest.Spec{Name: "replicated", Session: "s1", Tags: []string{"env:ci"}})
		if _, err := rw.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		ro := selectOnly(t, dsn)
		if _, err := postgres.Open(ctx, ro); err == nil {
			t.Fatal("Open as a role that may only SELECT worked; the test's role may write")
		}
		s, err := store.OpenReadOnly(ctx, ro)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, ok := s.(*postgres.Store); !ok {
			t.Fatalf("store.OpenReadOnly gave %T", s)
		}
		got, err := s.Trace(ctx, recs[0].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		storetest.SameRecords(t, got.Records, recs)
		if p, err := s.List(ctx, store.ListQuery{}); err != nil || len(p.Traces) != 1 {
			t.Fatalf("List: %v, %v", p.Traces, err)
		}
		q, _ := store.ParseQuery("weather tag:env:ci")
		if p, err := s.Search(ctx, q); err != nil || len(p.Hits) == 0 {
			t.Fatalf("Search: %v, %v", p.Hits, err)
		}
		if p, err := s.(store.SessionLister).Sessions(ctx, store.SessionQuery{}); err != nil || len(p.Sessions) != 1 {
			t.Fatalf("Sessions: %v, %v", p.Sessions, err)
		}
		checkWritesFail(t, s, "opened read-only (a read replica)")
	})

	t.Run("older", func(t *testing.T) {
		dsn := freshSchema(t)
		open(t, dsn).Close()
		setVersion(t, dsn, postgres.SchemaVersion-1)
		s, err := postgres.OpenReadOnly(ctx, selectOnly(t, dsn))
		if err == nil {
			s.Close()
			t.Fatal("OpenReadOnly of an older schema worked")
		}
		want := fmt.Sprintf("has schema version %d, this loupe reads version %d; migrate the primary first", postgres.SchemaVersion-1, postgres.SchemaVersion)
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	})

	t.Run("newer", func(t *testing.T) {
		dsn := freshSchema(t)
		open(t, dsn).Close()
		setVersion(t, dsn, postgres.SchemaVersion+1)
		s, err := postgres.OpenReadOnly(ctx, selectOnly(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		storetest.CheckReadOnly(t, s, postgres.SchemaVersion+1, postgres.SchemaVersion)
	})
}

// checkWritesFail checks that every write of s fails with an error
// containing want.
func checkWritesFail(t *testing.T, s store.Store, want string) {
	t.Helper()
	ctx := context.Background()
	id := trace.NewTraceID()
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a read-only store: %v, want an error saying %q", what, err, want)
		}
	}
	_, err := s.Append(ctx, storetest.Gen(storetest.Spec{}))
	check("Append", err)
	_, err = s.Delete(ctx, id)
	check("Delete", err)
	_, err = s.Prune(ctx, store.PrunePolicy{OlderThan: time.Hour})
	check("Prune", err)
	check("PutSetting", s.(store.Settings).PutSetting(ctx, "k", "v"))
	_, err = s.(store.Settings).DeleteSetting(ctx, "k")
	check("DeleteSetting", err)
	_, err = s.(store.Scorer).AddScores(ctx, []store.Score{{TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI}})
	check("AddScores", err)
	_, err = s.(store.Scorer).DeleteScores(ctx, "0123456789abcdef0123456789abcdef")
	check("DeleteScores", err)
	_, err = s.(store.Datasets).PutDatasetVersion(ctx, 0, store.DatasetVersion{Name: "d", Cases: json.RawMessage("[]")})
	check("PutDatasetVersion", err)
	_, err = s.(store.Datasets).DeleteDataset(ctx, "d")
	check("DeleteDataset", err)
	check("PutExperiment", s.(store.Datasets).PutExperiment(ctx, store.Experiment{Name: "e"}))
	_, err = s.(store.Datasets).DeleteExperiment(ctx, "e")
	check("DeleteExperiment", err)
	_, _, err = s.(store.Alerts).OpenFiring(ctx, store.Firing{ID: "0123456789abcdef0123456789abcdef", Monitor: "m", Metric: "error_rate", Started: time.Now()})
	check("OpenFiring", err)
	_, err = s.(store.Alerts).ResolveFiring(ctx, "0123456789abcdef0123456789abcdef", time.Now(), 0)
	check("ResolveFiring", err)
	check("AddDelivery", s.(store.Alerts).AddDelivery(ctx, store.Delivery{FiringID: "0123456789abcdef0123456789abcdef", Event: store.AlertFiring, Attempt: 1, Time: time.Now()}))
}

// TestOpenOnReplicaSaysSo opens a store for writing on a session the
// server keeps read-only, as a hot standby does: the error says why and
// what to do.
func TestOpenOnReplicaSaysSo(t *testing.T) {
	dsn := freshSchema(t)
	open(t, dsn).Close()
	_, err := postgres.Open(context.Background(), dsn+"&default_transaction_read_only=on")
	if err == nil || !strings.Contains(err.Error(), "this server takes no writes: a read replica?") {
		t.Fatalf("Open on a read-only server: %v", err)
	}
}

// TestSplit serves a primary and a replica that differ, as a lagging
// replica does: the replica is another schema, opened read-only as a role
// that may only SELECT. The reads over traces and scores answer from the
// replica; every write, and the settings, datasets and alerts, go to the
// primary.
func TestSplit(t *testing.T) {
	ctx := context.Background()
	pdsn, rdsn := freshSchema(t), freshSchema(t)
	primary, replicaRW := open(t, pdsn), open(t, rdsn)
	onReplica := storetest.Gen(storetest.Spec{Name: "on-replica", Session: "s-replica", Start: time.Now().Add(-time.Minute)})
	onPrimary := storetest.Gen(storetest.Spec{Name: "on-primary", Session: "s-primary", Start: time.Now().Add(-time.Minute)})
	rid, pid := onReplica[0].TraceID, onPrimary[0].TraceID
	if _, err := replicaRW.Append(ctx, onReplica); err != nil {
		t.Fatal(err)
	}
	if _, err := replicaRW.AddScores(ctx, []store.Score{{TraceID: rid, Name: "quality", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI}}); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Append(ctx, onPrimary); err != nil {
		t.Fatal(err)
	}
	replica, err := store.OpenReadOnly(ctx, selectOnly(t, rdsn))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := store.Split(primary, replica)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sp.(store.GroupAppender); ok {
		t.Error("the split of two PostgreSQL stores is a GroupAppender; the primary is not")
	}

	// Reads over traces and scores: the replica.
	if _, err := sp.Trace(ctx, rid); err != nil {
		t.Errorf("Trace of the replica's trace: %v", err)
	}
	if _, err := sp.Trace(ctx, pid); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Trace of the primary's trace: %v, want ErrNotFound (read from the replica)", err)
	}
	only := func(what string, ids []trace.TraceID, err error) {
		t.Helper()
		if err != nil || len(ids) != 1 || ids[0] != rid {
			t.Errorf("%s: %v, %v; want the replica's trace alone", what, ids, err)
		}
	}
	lp, err := sp.List(ctx, store.ListQuery{})
	var ids []trace.TraceID
	for _, s := range lp.Traces {
		ids = append(ids, s.ID)
	}
	only("List", ids, err)
	q, _ := store.ParseQuery("type:run.start")
	shp, err := sp.Search(ctx, q)
	ids = nil
	for _, h := range shp.Hits {
		ids = append(ids, h.TraceID)
	}
	only("Search", ids, err)
	ids = nil
	for r, err := range sp.Export(ctx, store.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq == 1 {
			ids = append(ids, r.TraceID)
		}
	}
	only("Export", ids, nil)
	if ag, err := sp.Aggregate(ctx, time.Time{}, time.Time{}); err != nil || ag.Traces != 1 {
		t.Errorf("Aggregate: %+v, %v; want the replica's one run", ag, err)
	}
	if p, err := sp.(store.RecordPager).Records(ctx, pid, store.RecordRange{}); err == nil {
		t.Errorf("Records of the primary's trace: %d records, want not found", len(p.Records))
	}
	if p, err := sp.(store.SessionLister).Sessions(ctx, store.SessionQuery{}); err != nil || len(p.Sessions) != 1 || p.Sessions[0].ID != "s-replica" {
		t.Errorf("Sessions: %+v, %v; want the replica's", p.Sessions, err)
	}
	if w, err := sp.(store.WindowStater).WindowStats(ctx, store.WindowQuery{}); err != nil || w.Traces != 1 {
		t.Errorf("WindowStats: %+v, %v; want the replica's one trace", w, err)
	}
	sc := sp.(store.Scorer)
	if p, err := sc.Scores(ctx, store.ScoreFilter{}); err != nil || len(p.Scores) != 1 || p.Scores[0].TraceID != rid {
		t.Errorf("Scores: %+v, %v; want the replica's", p.Scores, err)
	}
	if k, err := sc.ScoreKinds(ctx); err != nil || k["quality"] != store.ScoreNumeric {
		t.Errorf("ScoreKinds: %v, %v; want the replica's", k, err)
	}

	// Writes, settings, datasets and alerts: the primary.
	added := storetest.Gen(storetest.Spec{Name: "added"})
	if n, err := sp.Append(ctx, added); err != nil || n != len(added) {
		t.Fatalf("Append: %d, %v", n, err)
	}
	if _, err := primary.Trace(ctx, added[0].TraceID); err != nil {
		t.Errorf("the appended trace is not on the primary: %v", err)
	}
	if _, err := replicaRW.Trace(ctx, added[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the appended trace is on the replica: %v", err)
	}
	if _, err := sc.AddScores(ctx, []store.Score{{TraceID: pid, Name: "helpful", Kind: store.ScoreNumeric, Value: 1, Source: store.SourceAPI}}); err != nil {
		t.Fatal(err)
	}
	if p, err := primary.Scores(ctx, store.ScoreFilter{}); err != nil || len(p.Scores) != 1 || p.Scores[0].Name != "helpful" {
		t.Errorf("the primary's scores after AddScores: %+v, %v", p.Scores, err)
	}
	set := sp.(store.Settings)
	if err := set.PutSetting(ctx, "apikey:x", "hash"); err != nil {
		t.Fatal(err)
	}
	if m, err := set.Settings(ctx, "apikey:"); err != nil || m["apikey:x"] != "hash" {
		t.Errorf("Settings after PutSetting: %v, %v; want the primary's", m, err)
	}
	ds := sp.(store.Datasets)
	if _, err := ds.PutDatasetVersion(ctx, 0, store.DatasetVersion{Name: "golden", Cases: json.RawMessage("[]")}); err != nil {
		t.Fatal(err)
	}
	if l, err := ds.ListDatasets(ctx); err != nil || len(l) != 1 {
		t.Errorf("ListDatasets after PutDatasetVersion: %v, %v; want the primary's", l, err)
	}
	al := sp.(store.Alerts)
	f := store.Firing{ID: "0123456789abcdef0123456789abcdef", Monitor: "errors", Metric: "error_rate", Started: time.Now(), Window: time.Minute}
	if _, opened, err := al.OpenFiring(ctx, f); err != nil || !opened {
		t.Fatalf("OpenFiring: %v, %v", opened, err)
	}
	if fs, err := al.Firings(ctx, store.FiringFilter{}); err != nil || len(fs) != 1 {
		t.Errorf("Firings after OpenFiring: %v, %v; want the primary's", fs, err)
	}
	if n, err := sp.Delete(ctx, pid); err != nil || n != 1 {
		t.Errorf("Delete of the primary's trace: %d, %v", n, err)
	}
	if err := store.Configure(sp, store.Options{StaleAfter: time.Hour}); err != nil {
		t.Error(err)
	}
	if err := sp.Close(); err != nil {
		t.Error(err)
	}
	if _, err := replica.List(ctx, store.ListQuery{}); err == nil {
		t.Error("the replica is open after the split's Close")
	}

	// A replica that cannot answer what goes to it is refused.
	type bare struct{ store.Store }
	if _, err := store.Split(open(t, pdsn), bare{replicaRW}); err == nil || !strings.Contains(err.Error(), "the replica (postgres_test.bare) does not implement store.RecordPager") {
		t.Errorf("Split with a bare replica: %v", err)
	}
}

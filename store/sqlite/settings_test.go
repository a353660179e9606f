package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

func TestSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "apikey:a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "apikey:a", "2"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "apikez_b", "3"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "schema_version", "99"); err == nil {
		t.Error("schema_version could be overwritten")
	}
	got, err := s.Settings(ctx, "apikey:")
	if err != nil || len(got) != 1 || got["apikey:a"] != "2" {
		t.Errorf("Settings = %v, %v", got, err)
	}
	if ok, err := s.DeleteSetting(ctx, "apikey:a"); !ok || err != nil {
		t.Errorf("DeleteSetting = %v, %v", ok, err)
	}
	if ok, _ := s.DeleteSetting(ctx, "apikey:a"); ok {
		t.Error("deleted twice")
	}
	s.Close()
	// The schema version is untouched: the store opens again.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Settings(ctx, ""); len(got) != 1 || got["apikez_b"] != "3" {
		t.Errorf("after reopening: %v", got)
	}
}

package postgres

// Migrations exposes the migrations to the external tests.
var Migrations = migrations

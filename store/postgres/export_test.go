package postgres

// Migrations exposes the migrations to the external tests.
var Migrations = migrations

// AppendValid is Append without validation, for the tests that write what
// older versions could store.
var AppendValid = (*Store).appendValid

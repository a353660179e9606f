package sqlite

// AppendValid is Append without validation, for the tests that write what
// older versions could store.
var AppendValid = (*Store).appendValid

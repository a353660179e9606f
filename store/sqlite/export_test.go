package sqlite

// AppendValid is Append without validation, for the tests that write what
// older versions could store.
var AppendValid = (*Store).appendValid

// SetWALRestartFrames sets the WAL size past which the checkpointer
// checkpoints under the write lock, for the stores opened after, and
// returns a function that restores it.
func SetWALRestartFrames(n int64) (restore func()) {
	old := walRestartFrames
	walRestartFrames = n
	return func() { walRestartFrames = old }
}

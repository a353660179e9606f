package eval

import "fmt"

// Error is a problem in an eval file or transcript, located by file, line
// and column. Msg says what is wrong and what to do about it.
type Error struct {
	File string   // the file as named to the parser
	Pos  Position // where in File; zero when not known
	Msg  string   // what is wrong and what to do

	class errClass // how AgentV treats the problem (LoadAgentV)
}

// Error formats the error as file:line:column: message.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Pos.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Column, e.Msg)
	case e.File != "":
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Pos.Line > 0:
		return fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Column, e.Msg)
	}
	return e.Msg
}

package trace

// ValidJSON reports whether b is one valid JSON value, exactly as
// encoding/json.Valid does (the fuzz test FuzzValidJSON holds it to that),
// without its per-call setup: several times faster on the small values an
// agent records for every call (tool inputs and outputs), which the
// recorder checks on the caller's goroutine.
func ValidJSON(b []byte) bool {
	// stack holds the open containers, '{' or '['; it stays on the stack
	// of the goroutine unless values nest deeper than 32.
	var inline [32]byte
	stack := inline[:0]
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		closed := true // whether the value at i is complete once scanned
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxNesting { // an empty one counts too
				return false
			}
			i = skipSpace(b, i+1)
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if i < len(b) && b[i] == end {
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			closed = false
		case c == '"':
			if i = scanString(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = scanNumber(b, i); i < 0 {
				return false
			}
		default:
			return false
		}
		if !closed {
			continue // the first element of a container
		}
		// After a complete value: close containers, or go on to the next
		// element.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					if i = objectKey(b, i); i < 0 {
						return false
					}
				}
				break
			}
			if top == '{' && b[i] == '}' || top == '[' && b[i] == ']' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// maxNesting is encoding/json's limit on nested containers.
const maxNesting = 10000

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// objectKey scans `"key" :` and the space after it, and returns the index
// of the value, or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanString(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// scanString scans the string starting with the quote at b[i] and returns
// the index after its closing quote, or -1. Like encoding/json, it rejects
// control characters and bad escapes but not invalid UTF-8.
func scanString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and
// returns the index after it, or -1.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

package demo

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Eval evaluates an arithmetic expression: numbers (with an optional
// fraction and exponent), + - * / % ^ (power, right-associative), unary
// minus and plus, parentheses, and the functions sqrt, abs, round, floor,
// ceil, min and max. Errors give the byte offset of the problem.
func Eval(expr string) (float64, error) {
	p := &calcParser{s: expr}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, p.errorf("unexpected %q", p.s[p.i])
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("the result of %q is not a finite number", expr)
	}
	return v, nil
}

type calcParser struct {
	s     string
	i     int
	depth int
}

// maxDepth bounds nesting, so hostile input cannot exhaust the stack.
const maxDepth = 200

func (p *calcParser) errorf(format string, args ...any) error {
	return fmt.Errorf("expression %q, at offset %d: %s", p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *calcParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *calcParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// expr = term { ("+" | "-") term }
func (p *calcParser) expr() (float64, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return 0, p.errorf("the expression nests more than %d levels", maxDepth)
	}
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for {
		switch p.peek() {
		case '+':
			p.i++
			w, err := p.term()
			if err != nil {
				return 0, err
			}
			v += w
		case '-':
			p.i++
			w, err := p.term()
			if err != nil {
				return 0, err
			}
			v -= w
		default:
			return v, nil
		}
	}
}

// term = unary { ("*" | "/" | "%") unary }
func (p *calcParser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		at := p.i
		p.i++
		w, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op {
		case '*':
			v *= w
		case '/', '%':
			if w == 0 {
				p.i = at
				return 0, p.errorf("division by zero")
			}
			if op == '/' {
				v /= w
			} else {
				v = math.Mod(v, w)
			}
		}
	}
}

// unary = ("-" | "+") unary | power
func (p *calcParser) unary() (float64, error) {
	switch p.peek() {
	case '-', '+':
		neg := p.s[p.i] == '-'
		p.i++
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxDepth {
			return 0, p.errorf("the expression nests more than %d levels", maxDepth)
		}
		v, err := p.unary()
		if neg {
			v = -v
		}
		return v, err
	}
	return p.power()
}

// power = primary [ "^" unary ]
func (p *calcParser) power() (float64, error) {
	v, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.peek() == '^' {
		p.i++
		w, err := p.unary()
		if err != nil {
			return 0, err
		}
		return math.Pow(v, w), nil
	}
	return v, nil
}

var calcFuncs = map[string]func([]float64) (float64, error){
	"sqrt":  func(a []float64) (float64, error) { return math.Sqrt(a[0]), nil },
	"abs":   func(a []float64) (float64, error) { return math.Abs(a[0]), nil },
	"round": func(a []float64) (float64, error) { return math.Round(a[0]), nil },
	"floor": func(a []float64) (float64, error) { return math.Floor(a[0]), nil },
	"ceil":  func(a []float64) (float64, error) { return math.Ceil(a[0]), nil },
	"min":   func(a []float64) (float64, error) { return min(a[0], a[1]), nil },
	"max":   func(a []float64) (float64, error) { return max(a[0], a[1]), nil },
}

var calcArity = map[string]int{"sqrt": 1, "abs": 1, "round": 1, "floor": 1, "ceil": 1, "min": 2, "max": 2}

// primary = number | "(" expr ")" | name "(" expr { "," expr } ")"
func (p *calcParser) primary() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.i++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, p.errorf("missing )")
		}
		p.i++
		return v, nil
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		start := p.i
		for p.i < len(p.s) && (p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z') {
			p.i++
		}
		name := strings.ToLower(p.s[start:p.i])
		switch name {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		fn, ok := calcFuncs[name]
		if !ok {
			p.i = start
			return 0, p.errorf("unknown name %q (functions: sqrt, abs, round, floor, ceil, min, max; constants: pi, e)", name)
		}
		if p.peek() != '(' {
			return 0, p.errorf("%s needs ( after it", name)
		}
		p.i++
		var args []float64
		for {
			v, err := p.expr()
			if err != nil {
				return 0, err
			}
			args = append(args, v)
			if p.peek() == ',' {
				p.i++
				continue
			}
			break
		}
		if p.peek() != ')' {
			return 0, p.errorf("missing ) after the arguments of %s", name)
		}
		p.i++
		if len(args) != calcArity[name] {
			return 0, p.errorf("%s takes %d argument(s), got %d", name, calcArity[name], len(args))
		}
		return fn(args)
	case c == 0:
		return 0, p.errorf("the expression ends too early")
	}
	return 0, p.errorf("unexpected %q", c)
}

func (p *calcParser) number() (float64, error) {
	start := p.i
	digits := func() {
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '_') {
			p.i++
		}
	}
	digits()
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		digits()
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		save := p.i
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			digits()
		} else {
			p.i = save // not an exponent: leave the "e" to the caller
		}
	}
	raw := p.s[start:p.i]
	v, err := strconv.ParseFloat(strings.ReplaceAll(raw, "_", ""), 64)
	if err != nil {
		p.i = start
		return 0, p.errorf("bad number %q", raw)
	}
	return v, nil
}

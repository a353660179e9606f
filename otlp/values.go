package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// Attribute values: reading them, encoding them as JSON, and bounding
// their size and nesting.

// --- attribute helpers ---------------------------------------------------

func str(m pcommon.Map, k string) string {
	v, ok := m.Get(k)
	if !ok {
		return ""
	}
	return v.AsString()
}

func firstStr(m pcommon.Map, keys ...string) string {
	for _, k := range keys {
		if s := str(m, k); s != "" {
			return s
		}
	}
	return ""
}

func firstInt(m pcommon.Map, keys ...string) int64 {
	for _, k := range keys {
		v, ok := m.Get(k)
		if !ok {
			continue
		}
		var n int64
		switch v.Type() {
		case pcommon.ValueTypeInt:
			n = v.Int()
		case pcommon.ValueTypeDouble:
			if f := v.Double(); f >= 0 && f < 1<<62 {
				n = int64(f)
			}
		case pcommon.ValueTypeStr:
			n, _ = strconv.ParseInt(strings.TrimSpace(v.Str()), 10, 64)
		}
		if n > 0 {
			return n
		}
	}
	return 0
}

func firstFloat(m pcommon.Map, keys ...string) float64 {
	for _, k := range keys {
		v, ok := m.Get(k)
		if !ok {
			continue
		}
		var f float64
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			f = v.Double()
		case pcommon.ValueTypeInt:
			f = float64(v.Int())
		case pcommon.ValueTypeStr:
			f, _ = strconv.ParseFloat(strings.TrimSpace(v.Str()), 64)
		}
		if f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	}
	return 0
}

// firstJSON returns the first present attribute as a Value: a string is
// taken as JSON if it is JSON (instrumentations put JSON documents in
// string attributes), as text otherwise; other values are encoded.
func firstJSON(m pcommon.Map, keys ...string) trace.Value {
	for _, k := range keys {
		v, ok := m.Get(k)
		if !ok {
			continue
		}
		if v.Type() == pcommon.ValueTypeStr {
			return trace.Raw([]byte(v.Str()))
		}
		return valueJSON(v)
	}
	return nil
}

// indexed rebuilds the array that flattened attributes such as
// gen_ai.prompt.0.role, gen_ai.prompt.0.content, gen_ai.prompt.1.role or
// llm.input_messages.0.message.content describe: element N is an object
// of the keys after "N." (a leading "message." dropped), nested at dots.
func indexed(m pcommon.Map, prefix string) trace.Value {
	type elem struct {
		keys []string
		vals []pcommon.Value
	}
	var elems []elem
	m.Range(func(k string, v pcommon.Value) bool {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			return true
		}
		num, field, ok := strings.Cut(rest, ".")
		if !ok {
			return true
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n >= 4096 {
			return true
		}
		field = strings.TrimPrefix(field, "message.")
		if strings.Count(field, ".") > 32 {
			return true // absurdly deep: kept in the companion record only
		}
		for len(elems) <= n {
			elems = append(elems, elem{})
		}
		elems[n].keys = append(elems[n].keys, field)
		elems[n].vals = append(elems[n].vals, v)
		return true
	})
	if len(elems) == 0 {
		return nil
	}
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		root := &node{}
		for j, k := range e.keys {
			root.set(strings.Split(k, "."), e.vals[j])
		}
		b = root.appendJSON(b)
	}
	return append(b, ']')
}

// node is a tree of dotted keys, for indexed. Numeric segments become
// object keys too ("tool_calls":{"0":…}) except that an object whose keys
// are exactly 0..n-1 is written as an array.
type node struct {
	keys  []string
	kids  []*node
	value *pcommon.Value
}

func (n *node) set(path []string, v pcommon.Value) {
	if len(path) == 0 {
		n.value = &v
		return
	}
	for i, k := range n.keys {
		if k == path[0] {
			n.kids[i].set(path[1:], v)
			return
		}
	}
	if len(n.keys) >= 1024 {
		return
	}
	c := &node{}
	n.keys = append(n.keys, path[0])
	n.kids = append(n.kids, c)
	c.set(path[1:], v)
}

func (n *node) appendJSON(b []byte) []byte {
	if n.value != nil && len(n.keys) == 0 {
		if n.value.Type() == pcommon.ValueTypeStr {
			return trace.AppendString(b, n.value.Str())
		}
		return appendValue(b, *n.value, 0, DefaultMaxDepth)
	}
	isArray := len(n.keys) > 0
	for i, k := range n.keys {
		if k != strconv.Itoa(i) {
			isArray = false
			break
		}
	}
	// Keys come in attribute order; an array's elements may not.
	if !isArray {
		idx := make(map[string]int, len(n.keys))
		for i, k := range n.keys {
			idx[k] = i
		}
		isArray = len(n.keys) > 0
		for i := range n.keys {
			if _, ok := idx[strconv.Itoa(i)]; !ok {
				isArray = false
				break
			}
		}
		if isArray {
			b = append(b, '[')
			for i := range n.keys {
				if i > 0 {
					b = append(b, ',')
				}
				b = n.kids[idx[strconv.Itoa(i)]].appendJSON(b)
			}
			return append(b, ']')
		}
	}
	open, close := byte('{'), byte('}')
	if isArray {
		open, close = '[', ']'
	}
	b = append(b, open)
	for i, k := range n.keys {
		if i > 0 {
			b = append(b, ',')
		}
		if !isArray {
			b = trace.AppendString(b, k)
			b = append(b, ':')
		}
		b = n.kids[i].appendJSON(b)
	}
	return append(b, close)
}

// mapJSON encodes attributes as one JSON object, in their order; nil for
// none.
func mapJSON(m pcommon.Map) trace.Value {
	if m.Len() == 0 {
		return nil
	}
	return appendMap(nil, m, 0, DefaultMaxDepth)
}

func valueJSON(v pcommon.Value) trace.Value {
	return appendValue(nil, v, 0, DefaultMaxDepth)
}

func appendMap(b []byte, m pcommon.Map, depth, maxDepth int) []byte {
	b = append(b, '{')
	first := true
	m.Range(func(k string, v pcommon.Value) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = trace.AppendString(b, k)
		b = append(b, ':')
		b = appendValue(b, v, depth+1, maxDepth)
		return true
	})
	return append(b, '}')
}

// appendValue encodes an attribute value as JSON: bytes as base64, NaN and
// infinities as strings (JSON has no such numbers).
func appendValue(b []byte, v pcommon.Value, depth, maxDepth int) []byte {
	if depth > maxDepth {
		return trace.AppendString(b, fmt.Sprintf("<loupe: nested deeper than %d>", maxDepth))
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return trace.AppendString(b, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(b, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return trace.AppendString(b, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(b, v.Bool())
	case pcommon.ValueTypeBytes:
		return trace.AppendString(b, base64.StdEncoding.EncodeToString(v.Bytes().AsRaw()))
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		b = append(b, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, s.At(i), depth+1, maxDepth)
		}
		return append(b, ']')
	case pcommon.ValueTypeMap:
		return appendMap(b, v.Map(), depth, maxDepth)
	}
	return append(b, "null"...)
}

// --- limits --------------------------------------------------------------

// limitSpan truncates over-long and over-nested values in a span's
// attributes, its events' and its links'.
func limitSpan(sp ptrace.Span, o *Options) {
	limitMap(sp.Attributes(), o, 0)
	for i := 0; i < sp.Events().Len(); i++ {
		limitMap(sp.Events().At(i).Attributes(), o, 0)
	}
	for i := 0; i < sp.Links().Len(); i++ {
		limitMap(sp.Links().At(i).Attributes(), o, 0)
	}
	if max := o.maxValue(); max > 0 && len(sp.Name()) > max {
		sp.SetName(string(limitValue(trace.Text(sp.Name()), max)))
	}
}

func limitMap(m pcommon.Map, o *Options, depth int) {
	m.Range(func(_ string, v pcommon.Value) bool {
		limitVal(v, o, depth+1)
		return true
	})
}

func limitVal(v pcommon.Value, o *Options, depth int) {
	max := o.maxValue()
	if depth > o.maxDepth() && (v.Type() == pcommon.ValueTypeSlice || v.Type() == pcommon.ValueTypeMap) {
		v.SetStr(fmt.Sprintf("<loupe: nested deeper than %d>", o.maxDepth()))
		return
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		if max > 0 && len(v.Str()) > max {
			v.SetStr(string(truncated([]byte(v.Str()), max)))
		}
	case pcommon.ValueTypeBytes:
		if max > 0 && v.Bytes().Len() > max {
			v.SetStr(string(truncated(v.Bytes().AsRaw(), max)))
		}
	case pcommon.ValueTypeSlice:
		for i := 0; i < v.Slice().Len(); i++ {
			limitVal(v.Slice().At(i), o, depth+1)
		}
	case pcommon.ValueTypeMap:
		limitMap(v.Map(), o, depth)
	}
}

// norm makes v the form the record encoding keeps: compact JSON, and
// nil for null.
func norm(v trace.Value) trace.Value {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	if spaceOutsideStrings(v) {
		var b bytes.Buffer
		if json.Compact(&b, v) == nil {
			return b.Bytes()
		}
	}
	return v
}

// spaceOutsideStrings reports whether the JSON text v has whitespace that
// json.Compact would remove: outside its strings. Text values mostly hold
// spaces only inside strings, and compacting them would copy them
// unchanged.
func spaceOutsideStrings(v []byte) bool {
	in := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case ' ', '\t', '\r', '\n':
			return true
		}
	}
	return false
}

// LimitValue returns v, or the recorder's truncation marker for it
// ({"$loupe":"truncated","bytes":N,"head":…}) if v is longer than max
// bytes (max ≤ 0: no limit). A marker is returned as it is.
func LimitValue(v trace.Value, max int) trace.Value { return limitValue(v, max) }

// limitValue replaces a Value longer than max by the truncation marker.
func limitValue(v trace.Value, max int) trace.Value {
	if max <= 0 || len(v) <= max {
		return v
	}
	if ok, _ := v.Truncated(); ok {
		return v
	}
	return truncated(v, max)
}

// truncated is the recorder's truncation marker for b: its size and its
// first max bytes (whole runes) as text. The cut takes constant time
// whatever b holds (invalid bytes become U+FFFD in the marker's string).
func truncated(b []byte, max int) trace.Value {
	head := trace.TruncateUTF8(string(b[:min(len(b), max+utf8.UTFMax)]), max)
	out := make([]byte, 0, max+64)
	out = append(out, `{"$loupe":"truncated","bytes":`...)
	out = strconv.AppendInt(out, int64(len(b)), 10)
	out = append(out, `,"head":`...)
	out = trace.AppendString(out, string(head))
	return append(out, '}')
}

package trace_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

var validCases = []string{
	``, ` `, `null`, `nul`, `nullx`, `true`, `false`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e5`, `1E+5`, `1e`, `-1.5e-3`, `.5`,
	`""`, `"a\"b"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"a\tb\"", `"é"`, "\"\xff\"", `"abc`,
	`{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" : [1, 2, {"b": null}] }`, `{a:1}`, `{"a"}`, `{"a":}`, `{"a":1 "b":2}`,
	`[]`, `[1,]`, `[,1]`, `[1 2]`, `[[[]]]`, `[[]`, `[]]`, `]`, `1 2`, " \n[1]\t", `{"a":1}}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40),
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := trace.ValidJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("ValidJSON(%.40q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzValidJSON holds ValidJSON to encoding/json.Valid on any input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := trace.ValidJSON(b), json.Valid(b); got != want {
			t.Fatalf("ValidJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	in := []byte(`{"expr":"6*7","n":12,"tags":["a","b"]}`)
	b.Run("ValidJSON", func(b *testing.B) {
		for b.Loop() {
			trace.ValidJSON(in)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			json.Valid(in)
		}
	})
}

package traceio

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/otlp"
)

// TestOTLPFiles: OTLP/JSON files (one document, or one a line) are
// detected and read through package otlp, giving the records otlp.Map
// gives, with the seqs it derives.
func TestOTLPFiles(t *testing.T) {
	doc, err := os.ReadFile("../otlp/testdata/genai.json")
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile("../otlp/testdata/openinference.json")
	if err != nil {
		t.Fatal(err)
	}
	oneLine := func(b []byte) string { return strings.ReplaceAll(string(b), "\n", "") }
	var want []byte
	for _, d := range [][]byte{doc, other} {
		td, err := otlp.DecodeJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range otlp.Map(td, nil).Records {
			want = append(r.AppendJSON(want), '\n')
		}
	}
	if f, err := Detect(doc); err != nil || f != FormatOTLP {
		t.Fatalf("Detect = %q, %v", f, err)
	}
	for name, in := range map[string]string{
		"lines":     oneLine(doc) + "\n" + oneLine(other) + "\n",
		"documents": string(doc) + "\n\n" + string(other),
	} {
		var got []byte
		for r, err := range Read(strings.NewReader(in), "spans.json", FormatAuto) {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(r.AppendJSON(got), '\n')
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: records differ from otlp.Map's", name)
		}
	}
}

func TestOTLPErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00000000000000000000000000000000","spanId":"0102030405060708","startTimeUnixNano":"1"}]}]}]}`,
			"x.json:1: field resourceSpans[0].scopeSpans[0].spans[0]: traceId is missing or all zeros"},
		{"{\"resourceSpans\":[]}\n{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"zz\"}]}]}]}", "x.json:2: not OTLP/JSON"},
		{`{"resourceSpans":[}`, "x.json:1: not valid JSON"},
	} {
		_, _, err := func() (int, Format, error) {
			for _, err := range Read(strings.NewReader(tt.in), "x.json", FormatOTLP) {
				if err != nil {
					return 0, "", err
				}
			}
			return 0, "", nil
		}()
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%.40s: got %v, want %q", tt.in, err, tt.want)
		}
	}
}

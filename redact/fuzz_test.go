package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/loupe-dev/loupe/redact"
)

// FuzzJSON checks that the redactor never panics, never writes into its
// input, keeps valid JSON valid, and that redacting twice changes nothing
// more than redacting once.
func FuzzJSON(f *testing.F) {
	seeds := []string{
		`{"api_key":"abc","q":"x"}`,
		`{"credentials":{"user":"u","pw":["p",{"a":"b"}]},"n":1}`,
		`[{"token":null},"Bearer abc","` + openAI + `"]`,
		`{"e":"say \"Bearer abc\" \\ ok","pass\u0077ord":1}`,
		`"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"`,
		`{"u":"postgres://a:b@h/d","s":"aws_secret_access_key=` + awsSecret + `"}`,
		`{"x":"` + jwt + `","y":"` + ghp + `"}`,
		`{"password" : "x" , "a":[1,2,{"cookie":true}]}`,
		`{"e":"Bearer abc`,
		`not json: password=1`,
		"\"\xff\xfe password=\x00\"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	rd := redact.Default()
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := string(in)
		out := rd.JSON(in)
		if string(in) != orig {
			t.Fatalf("JSON modified its input")
		}
		if json.Valid(in) && !json.Valid(out) {
			t.Fatalf("valid input %q became invalid: %q", in, out)
		}
		_ = rd.String(orig)
	})
}

// FuzzString checks that String never panics and is stable: what it
// returns has nothing left to redact.
func FuzzString(f *testing.F) {
	for _, s := range []string{"password=hunter2", "Authorization: Bearer abc", openAI, pem, "x://u:p@h", "AWS_SECRET_ACCESS_KEY=" + awsSecret} {
		f.Add(s)
	}
	rd := redact.Default()
	f.Fuzz(func(t *testing.T, s string) {
		once := rd.String(s)
		if twice := rd.String(once); twice != once {
			t.Fatalf("String is not stable on %q:\nonce  %q\ntwice %q", s, once, twice)
		}
	})
}

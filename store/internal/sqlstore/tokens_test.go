package sqlstore

import (
	"slices"
	"testing"
)

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"Hello, World!", []string{"hello", "world"}},
		{"cust-4711", []string{"cust", "4711"}},
		{"https://api.example.com/v1?id=17", []string{"https", "api", "example", "com", "v1", "id", "17"}},
		{"3.14", []string{"3", "14"}},
		{"Café CRÈME brûlée", []string{"cafe", "creme", "brulee"}},
		{"Ærøskøbing Łódź straße", []string{"ærøskøbing", "łodz", "straße"}}, // letters of their own stay
		{"ŞĂ ǅ ḝ Ṩ", []string{"sa", "ǆ", "e", "s"}},                          // Latin Extended-A, -B and Additional
		{"Ελληνικά", []string{"ελληνικά"}},                                   // not Latin: kept
		{"İstanbul", []string{"istanbul"}},
		{"!!! ???", nil},
		{"", nil},
	} {
		if got := Tokens(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
		want := ""
		for i, w := range tt.want {
			if i > 0 {
				want += " "
			}
			want += w
		}
		if got := TokenText(tt.in); got != want {
			t.Errorf("TokenText(%q) = %q, want %q", tt.in, got, want)
		}
	}
}

// FuzzTokens: splitting and folding are stable: the tokens of TokenText
// are the same tokens, so an index fed TokenText holds what a query is
// split into.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"Café crème", "cust-4711", "Ærø ǅ", "\xff\x00a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokens(s)
		text := TokenText(s)
		if again := Tokens(text); !slices.Equal(again, toks) {
			t.Errorf("Tokens(TokenText(%q)) = %q, want %q", s, again, toks)
		}
	})
}

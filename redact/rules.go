package redact

import (
	"regexp"
	"strings"
	"sync"
)

// DefaultKeys are the JSON key suffixes whose values Default replaces (see
// Config.Keys).
var defaultKeys = []string{
	"apikey", "api_key", "password", "passwd", "secret", "token", "access_token",
	"authorization", "cookie", "credential", "credentials",
	"accesskey", "privatekey", "secretkey", "sessionid", "session_id",
}

// defaultRules returns the rules of DefaultConfig, compiled anew so that
// callers may keep and change what they get.
func defaultRules() []Rule {
	re := regexp.MustCompile
	// tok is the alphabet of a token in most formats: it excludes quotes,
	// spaces and the punctuation that ends a token in text.
	return []Rule{
		{
			Name:     "pem-private-key",
			Keywords: []string{"PRIVATE KEY-----"},
			// Without its END line (a truncated value) the key is cut to
			// the end of the string.
			Pattern: re(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)`),
		},
		{
			Name:     "anthropic",
			Keywords: []string{"sk-ant-"},
			Pattern:  re(`\bsk-ant-[A-Za-z0-9_\-]{16,}`),
		},
		{
			Name:     "openai",
			Keywords: []string{"sk-"},
			// sk-…, sk-proj-…, sk-svcacct-…, sk-admin-…
			Pattern: re(`\bsk-[A-Za-z0-9_\-]{20,}`),
		},
		{
			Name:     "google",
			Keywords: []string{"AIza"},
			Pattern:  re(`\bAIza[0-9A-Za-z_\-]{35}`),
		},
		{
			Name:     "github",
			Keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
			// No \b: the prefixes are distinctive enough to be found inside
			// a longer word ("fetch_ghp_…").
			Pattern: re(`(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
		},
		{
			Name:     "slack",
			Keywords: []string{"xox"},
			Pattern:  re(`\bxox[abposr]-[A-Za-z0-9\-]{10,}`),
		},
		{
			Name:     "stripe",
			Keywords: []string{"_live_", "_test_"},
			Pattern:  re(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}`),
		},
		{
			Name:     "aws-access-key",
			Keywords: []string{"AKIA", "ASIA", "ABIA", "ACCA"},
			Pattern:  re(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`),
		},
		{
			Name:     "aws-secret-key",
			Keywords: []string{"ecret_access_key", "ECRET_ACCESS_KEY", "ecretAccessKey", "ecret-access-key", "aws_secret", "AWS_SECRET"},
			// A secret key has no prefix of its own: it is found by the
			// name it is given.
			Pattern: re(`(?i)secret[_-]?(?:access[_-]?)?key["']?\s*[=:]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)`),
			Group:   1,
		},
		{
			Name:     "jwt",
			Keywords: []string{"eyJ"},
			Pattern:  re(`\beyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*`),
		},
		{
			Name:     "bearer",
			Keywords: []string{"Bearer", "bearer", "BEARER"},
			Pattern:  re(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]+=*)`),
			Group:    1,
		},
		{
			Name:      "url-credentials",
			Prefilter: urlCredentials,
			// scheme://user:password@host: the password goes.
			Pattern: re(`\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@"']+:([^/\s@"']+)@`),
			Group:   1,
		},
		{
			Name:      "assignment",
			Prefilter: assignment,
			// name=value, name: value, "name": "value" in text (error
			// messages, logs, command lines), for names ending like the
			// default keys. The value must not start with '[' so that a
			// replacement is not replaced again.
			Pattern: re(`(?i)\b[\w.\-]*(?:(?:api|access|secret|private)[_\-]?key|password|passwd|secret|token|authorization|cookie|credentials?)["']?\s*[=:]\s*["']?(?:(?:basic|bearer|token)\s+)?([^\s"',;&})\]\[][^\s"',;&})\]]*)`),
			Group:   1,
		},
	}
}

// DefaultConfig returns the configuration of Default: every rule above
// and the default keys, with DefaultReplacement. Each call returns new
// slices, free to change.
func DefaultConfig() Config {
	return Config{Rules: defaultRules(), Keys: append([]string(nil), defaultKeys...), Replacement: DefaultReplacement}
}

var defaultRedactor = sync.OnceValue(func() *Redactor {
	rd, err := New(DefaultConfig())
	if err != nil {
		panic("redact: the default configuration is invalid: " + err.Error()) // a bug in this package, caught by its tests
	}
	return rd
})

// Default returns the Redactor for DefaultConfig, shared and safe for
// concurrent use.
func Default() *Redactor { return defaultRedactor() }

// urlCredentials reports whether s has a "://" followed by an "@" within
// the same authority (before a '/', a space or a quote): the shape of
// scheme://user:password@host.
func urlCredentials(s string) bool {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return false
		}
		s = s[i+3:]
		j := strings.IndexAny(s, "@/ \t\n\"'")
		if j >= 0 && s[j] == '@' {
			return true
		}
	}
}

// assignmentNames are the name endings the "assignment" rule looks for,
// lower case and letters only (see nameEndsWith).
var assignmentNames = []string{
	"apikey", "accesskey", "secretkey", "privatekey", "password", "passwd",
	"secret", "token", "authorization", "cookie", "credential", "credentials",
}

// assignment reports whether s has a '=' or ':' right after (maybe past a
// quote and spaces) a name ending like one of assignmentNames: the only
// places the "assignment" pattern can match. Text is full of "tokens" and
// colons; this finds the few places worth running the pattern at.
func assignment(s string) bool {
	colon, eq := -2, -2 // next ':' and '=' at or after i; -2 not searched yet, -1 none
	for i := 0; i < len(s); i++ {
		if colon != -1 && colon < i {
			if colon = strings.IndexByte(s[i:], ':'); colon >= 0 {
				colon += i
			}
		}
		if eq != -1 && eq < i {
			if eq = strings.IndexByte(s[i:], '='); eq >= 0 {
				eq += i
			}
		}
		switch {
		case colon < 0 && eq < 0:
			return false
		case colon < 0 || eq >= 0 && eq < colon:
			i = eq
		default:
			i = colon
		}
		j := i - 1
		for j >= 0 && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j--
		}
		if j >= 0 && (s[j] == '"' || s[j] == '\'') {
			j--
		}
		// Every name ends in one of these letters: most colons are turned
		// away here.
		if j < 0 || strings.IndexByte("ydtnels", lower(s[j])) < 0 {
			continue
		}
		end := j + 1
		for j >= 0 && (isAlnum(lower(s[j])) || s[j] == '_' || s[j] == '-' || s[j] == '.') {
			j--
		}
		name := s[j+1 : end]
		for _, n := range assignmentNames {
			if hasSuffixFold(name, n) {
				return true
			}
		}
	}
	return false
}

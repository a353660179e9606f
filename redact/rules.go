package redact

import (
	"regexp"
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
			Pattern:  re(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
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
			Name:     "url-credentials",
			Keywords: []string{"://"},
			// scheme://user:password@host: the password goes.
			Pattern: re(`\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@"']+:([^/\s@"']+)@`),
			Group:   1,
		},
		{
			Name: "assignment",
			Keywords: []string{
				"password", "Password", "PASSWORD", "passwd", "PASSWD",
				"secret", "Secret", "SECRET", "token", "Token", "TOKEN",
				"api_key", "apikey", "api-key", "apiKey", "ApiKey", "APIKey", "API_KEY", "APIKEY", "API-KEY",
				"authorization", "Authorization", "AUTHORIZATION", "cookie", "Cookie", "COOKIE",
			},
			// name=value, name: value, "name": "value" in text (error
			// messages, logs, command lines), for names ending like the
			// default keys. The value must not start with '[' so that a
			// replacement is not replaced again.
			Pattern: re(`(?i)\b[\w.\-]*(?:api[_\-]?key|password|passwd|secret|token|authorization|cookie)["']?\s*[=:]\s*["']?(?:(?:basic|bearer|token)\s+)?([^\s"',;&})\]\[][^\s"',;&})\]]*)`),
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

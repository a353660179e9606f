package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/tool"
)

// CalcInput is the calculator's input.
type CalcInput struct {
	Expression string `json:"expression" jsonschema:"an arithmetic expression, e.g. (2 + 3) * 4 / 5; supports + - * / % ^, parentheses, sqrt, abs, round, floor, ceil, min, max, pi, e"`
}

// CalcOutput is the calculator's result.
type CalcOutput struct {
	Expression string  `json:"expression"`
	Value      float64 `json:"value"`
}

// Calculator returns a tool that evaluates arithmetic expressions with
// Eval.
func Calculator() *tool.FuncTool[CalcInput, CalcOutput] {
	return tool.Func("calculator", "Evaluate an arithmetic expression exactly.",
		func(_ context.Context, in CalcInput) (CalcOutput, error) {
			v, err := Eval(in.Expression)
			if err != nil {
				return CalcOutput{}, err
			}
			return CalcOutput{Expression: in.Expression, Value: v}, nil
		})
}

// SearchInput is the file search's input.
type SearchInput struct {
	Pattern string `json:"pattern" jsonschema:"a regular expression (RE2 syntax) to look for, line by line"`
	Glob    string `json:"glob,omitempty" jsonschema:"only search files whose base name matches this glob, e.g. *.go"`
	Max     int    `json:"max,omitempty" jsonschema:"the most matches to return (default 20)"`
}

// Match is one line that matched.
type Match struct {
	File string `json:"file"` // relative to the searched folder
	Line int    `json:"line"` // from 1
	Text string `json:"text"` // the line, trimmed and cut to 200 bytes
}

// SearchOutput is the file search's result.
type SearchOutput struct {
	Matches   []Match `json:"matches"`
	Files     int     `json:"files_searched"`
	Truncated bool    `json:"truncated,omitempty"` // more matches exist than were returned
}

// FileSearch returns a tool that searches the text files under root for a
// regular expression and returns the matches as file:line. It skips
// hidden directories, files over 1 MiB and files that look binary.
func FileSearch(root string) *tool.FuncTool[SearchInput, SearchOutput] {
	return tool.Func("search_files", "Search the project's text files for a regular expression; returns file, line and text of each match.",
		func(ctx context.Context, in SearchInput) (SearchOutput, error) {
			return searchFiles(ctx, root, in)
		})
}

func searchFiles(ctx context.Context, root string, in SearchInput) (SearchOutput, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return SearchOutput{}, fmt.Errorf("pattern %q is not a valid regular expression: %v", in.Pattern, err)
	}
	if in.Glob != "" {
		if _, err := filepath.Match(in.Glob, ""); err != nil {
			return SearchOutput{}, fmt.Errorf("glob %q is malformed: %v", in.Glob, err)
		}
	}
	limit := in.Max
	if limit <= 0 {
		limit = 20
	}
	out := SearchOutput{Matches: []Match{}}
	errFull := errors.New("full")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // unreadable entries are skipped, not fatal
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && strings.HasPrefix(name, ".") || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if in.Glob != "" {
			if ok, _ := filepath.Match(in.Glob, name); !ok {
				return nil
			}
		}
		if info, err := d.Info(); err != nil || info.Size() > 1<<20 {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		out.Files++
		return grepFile(path, filepath.ToSlash(rel), re, limit, &out, errFull)
	})
	if err != nil && !errors.Is(err, errFull) {
		return SearchOutput{}, fmt.Errorf("searching %s: %w", root, err)
	}
	return out, nil
}

func grepFile(path, rel string, re *regexp.Regexp, limit int, out *SearchOutput, errFull error) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if n == 1 && isBinary(line) {
			return nil
		}
		if !re.Match(line) {
			continue
		}
		if len(out.Matches) == limit {
			out.Truncated = true
			return errFull
		}
		text := strings.TrimSpace(string(line))
		if len(text) > 200 {
			text = text[:200]
		}
		out.Matches = append(out.Matches, Match{File: rel, Line: n, Text: text})
	}
	return nil
}

func isBinary(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return true
		}
	}
	return false
}

// ClockInput is the clock's input.
type ClockInput struct {
	Zone string `json:"zone" jsonschema:"an IANA time zone, e.g. Europe/Paris or UTC"`
}

// ClockOutput is the clock's result.
type ClockOutput struct {
	Zone string `json:"zone"`
	Time string `json:"time"` // RFC 3339, in the zone
}

// Clock returns a tool that tells the current time in an IANA time zone;
// an unknown zone is an error. now is the time source (nil: time.Now).
func Clock(now func() time.Time) *tool.FuncTool[ClockInput, ClockOutput] {
	if now == nil {
		now = time.Now
	}
	return tool.Func("clock", "Tell the current time in an IANA time zone.",
		func(_ context.Context, in ClockInput) (ClockOutput, error) {
			if in.Zone == "" || strings.EqualFold(in.Zone, "local") {
				return ClockOutput{}, fmt.Errorf("zone %q is not an IANA time zone name; use one such as UTC or Europe/Paris", in.Zone)
			}
			loc, err := time.LoadLocation(in.Zone)
			if err != nil {
				return ClockOutput{}, fmt.Errorf("unknown time zone %q; use an IANA name such as UTC or Asia/Tokyo", in.Zone)
			}
			return ClockOutput{Zone: in.Zone, Time: now().In(loc).Format(time.RFC3339)}, nil
		})
}

package pipeline

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostile are inputs built to cost a parser time or memory: alias bombs,
// deep nesting of every kind YAML has, and the largest files and pipelines
// the limits let through.
var hostile = map[string]func() string{
	"alias bomb": func() string {
		s := "a: &a [" + strings.Repeat(`"lol",`, 9) + `"lol"]` + "\n"
		prev := "a"
		for i := range 12 {
			n := fmt.Sprintf("b%d", i)
			s += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
			prev = n
		}
		return s
	},
	"flow nesting":         func() string { return "pipeline: " + strings.Repeat("[", 100_000) },
	"flow mapping nesting": func() string { return "pipeline: " + strings.Repeat("{a: ", 60_000) },
	"compact sequences":    func() string { return "pipeline:\n  " + strings.Repeat("- ", 100_000) + "x\n" },
	"complex keys":         func() string { return strings.Repeat("? ", 100_000) + "a\n" },
	"indentation":          func() string { return deepBlock(700) },
	"long scalar":          func() string { return "parameters:\n  p: " + strings.Repeat("x", MaxFileSize-100) + "\n" },
	"many steps": func() string {
		return "servers: {s: x}\npipeline:\n" + strings.Repeat("  - s.t:\n      output: [v]\n", MaxFileSize/32)
	},
	"many branches": func() string {
		var b strings.Builder
		b.WriteString("servers: {router: builtin, generator: builtin}\npipeline:\n  - branch:\n      router: check_quality\n      branches:\n")
		for i := 0; b.Len() < MaxFileSize-64; i++ {
			fmt.Fprintf(&b, "        b%d: [generator.x]\n", i)
		}
		return b.String()
	},
	"nested loops and branches": func() string {
		s := "[s.t]"
		for i := range 10 {
			if i%2 == 0 {
				s = "[{loop: {times: 1000, steps: " + s + "}}]"
			} else {
				s = "[{branch: {router: r, branches: {a: " + s + ", b: " + s + "}}}]"
			}
		}
		return "servers: {s: x}\npipeline: " + s + "\n"
	},
	"parameter chain": func() string {
		var b strings.Builder
		b.WriteString("pipeline: [s.t]\nparameters:\n")
		for i := 0; b.Len() < MaxFileSize-64; i++ {
			fmt.Fprintf(&b, "  p%d: $p%d\n", i, i+1)
		}
		return b.String()
	},
}

// TestPipelineHostileInput parses, validates and draws each hostile input
// in a child process (a crash or a hang fails this test, not the suite) and
// checks what it allocated.
func TestPipelineHostileInput(t *testing.T) {
	if name := os.Getenv("LOUPE_PIPELINE_HOSTILE"); name != "" {
		src := hostile[name]()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, err := Parse("f.yaml", []byte(src))
		n := 0
		if err == nil {
			n = len(p.Validate())
			_, _ = p.Mermaid(), p.DOT()
		}
		runtime.ReadMemStats(&after)
		fmt.Printf("alloc=%d errors=%d parse=%v\n", after.TotalAlloc-before.TotalAlloc, n, err != nil)
		os.Exit(0)
	}
	for name := range hostile {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, not a speed check
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPipelineHostileInput$")
			cmd.Env = append(os.Environ(), "LOUPE_PIPELINE_HOSTILE="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			line := string(out)
			i := strings.Index(line, "alloc=")
			if i < 0 {
				t.Fatalf("child printed no result:\n%s", out)
			}
			f := strings.Fields(line[i+len("alloc="):])
			alloc, _ := strconv.Atoi(f[0])
			// Generous: the point is "bounded", far from exponential. (goccy/go-yaml
			// allocates about 1.5 KB per byte of a 64 KiB file; total, not peak.)
			if alloc > 256<<20 {
				t.Errorf("allocated %d MB; want at most 256", alloc>>20)
			}
			t.Logf("%s", strings.TrimSpace(line[i:]))
		})
	}
}

// FuzzParse checks that Parse, Validate and the graphs never panic and
// that what they report is well formed.
func FuzzParse(f *testing.F) {
	for _, tc := range realPipelines {
		src, err := os.ReadFile("../testdata/real/" + tc.file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, name := range []string{"alias bomb", "nested loops and branches"} {
		f.Add([]byte(hostile[name]()))
	}
	f.Add([]byte("pipeline:\n  - s.t:\n    input: {a: $b}\n"))
	f.Add([]byte("servers: {a: 'x \"y'}\npipeline: [{branch: {router: [a.b], value_map: {x: [y, y]}, branches: {x: []}}}]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("f.yaml", src)
		if err != nil {
			if p != nil {
				t.Fatal("a pipeline with an error")
			}
			for _, e := range err.(ErrorList) {
				if e.Msg == "" || e.File != "f.yaml" {
					t.Fatalf("malformed error %+v", e)
				}
			}
			return
		}
		errs := p.Validate()
		for i, e := range errs {
			if !strings.Contains(e.Msg, "expected") {
				t.Errorf("error without what was expected: %s", e)
			}
			if i > 0 && e.Pos.Before(errs[i-1].Pos) {
				t.Errorf("errors out of order: %s before %s", errs[i-1], e)
			}
		}
		_, _ = p.Mermaid(), p.DOT()
		_ = p.Commands()
	})
}

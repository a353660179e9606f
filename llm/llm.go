// Package llm opens a model from a short spec, "provider:model", so that
// flags, environment variables and config files name any model the same
// way: --judge-model openai:gpt-4o-mini, model: anthropic:claude-sonnet-4-5,
// LOUPE_MODEL=ollama:llama3.2, or scripted:testdata/turns.yaml offline.
//
// The providers are the packages under llm/; Open only chooses one and
// passes it the base URL, API key and price table. Code that needs a
// provider's own options (a configured client, thinking budgets, request
// parameters) calls that package's New directly.
package llm

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/anthropic"
	"github.com/loupe-dev/loupe/llm/openai"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/price"
)

// Options are what a spec leaves out. The zero value uses each provider's
// environment variables and Loupe's default price table.
type Options struct {
	// BaseURL replaces the provider's endpoint, for an OpenAI-compatible
	// server (vLLM, llama.cpp's server, LM Studio) or a proxy.
	BaseURL string
	// APIKey replaces the key the provider reads from its environment
	// variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENROUTER_API_KEY).
	APIKey string
	// Prices prices the calls; nil means price.Default (the embedded
	// table, or the file $LOUPE_PRICES names).
	Prices *price.Table
	// Getenv reads the environment; nil means os.Getenv. Tests set it.
	Getenv func(string) string
}

// provider opens one kind of spec.
type provider struct {
	help string
	open func(name string, o Options) (agent.Model, error)
}

var providers = map[string]provider{
	"openai": {
		help: "OpenAI Chat Completions, or any compatible server with a base URL (OPENAI_API_KEY, OPENAI_BASE_URL)",
		open: func(name string, o Options) (agent.Model, error) {
			return openai.New(name, openaiOptions(o, "", "")...)
		},
	},
	"openai-responses": {
		help: "OpenAI's Responses API (OPENAI_API_KEY, OPENAI_BASE_URL)",
		open: func(name string, o Options) (agent.Model, error) {
			return openai.New(name, append(openaiOptions(o, "", ""), openai.WithResponsesAPI())...)
		},
	},
	"anthropic": {
		help: "the Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)",
		open: func(name string, o Options) (agent.Model, error) {
			var opts []anthropic.Option
			if o.BaseURL != "" {
				opts = append(opts, anthropic.WithBaseURL(o.BaseURL))
			}
			if o.APIKey != "" {
				opts = append(opts, anthropic.WithAPIKey(o.APIKey))
			}
			if o.Prices != nil {
				opts = append(opts, anthropic.WithPrices(o.Prices))
			}
			return anthropic.New(name, opts...)
		},
	},
	"ollama": {
		help: "a local Ollama server (OLLAMA_HOST, default http://localhost:11434)",
		open: func(name string, o Options) (agent.Model, error) {
			base := "http://localhost:11434"
			if h := o.getenv("OLLAMA_HOST"); h != "" {
				base = h
				if !strings.Contains(base, "://") {
					base = "http://" + base
				}
			}
			base = strings.TrimRight(base, "/") + "/v1"
			// Ollama ignores the key, but the SDK wants one.
			return openai.New(name, openaiOptions(o, base, "ollama")...)
		},
	},
	"openrouter": {
		help: "OpenRouter's OpenAI-compatible API (OPENROUTER_API_KEY)",
		open: func(name string, o Options) (agent.Model, error) {
			key := o.getenv("OPENROUTER_API_KEY")
			return openai.New(name, openaiOptions(o, "https://openrouter.ai/api/v1", key)...)
		},
	},
	"scripted": {
		help: "turns played back from a YAML or JSON script file, offline (see package llm/scripted)",
		open: func(path string, o Options) (agent.Model, error) {
			s, err := scripted.Load(path)
			if err != nil {
				return nil, err
			}
			return s.NewModel(), nil
		},
	},
}

// openaiOptions turns o into openai options over a provider's defaults
// (a base URL and key that o's own, when set, replace).
func openaiOptions(o Options, base, key string) []openai.Option {
	var opts []openai.Option
	if o.BaseURL != "" {
		base = o.BaseURL
	}
	if o.APIKey != "" {
		key = o.APIKey
	}
	if base != "" {
		opts = append(opts, openai.WithBaseURL(base))
	}
	if key != "" {
		opts = append(opts, openai.WithAPIKey(key))
	}
	if o.Prices != nil {
		opts = append(opts, openai.WithPrices(o.Prices))
	}
	return opts
}

func (o Options) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

// Open returns the model spec names: "openai:gpt-4o-mini",
// "openai-responses:gpt-5-mini" (the same model through OpenAI's
// Responses API), "anthropic:claude-sonnet-4-5", "ollama:llama3.2",
// "openrouter:meta-llama/llama-3.1-8b-instruct" or "scripted:FILE"
// (Providers lists them). Everything after the first colon is the model
// name (or, for scripted, the file), passed on as written.
//
// Open makes no network call: a wrong key or an unreachable server shows
// up as the first Generate's error. It fails, saying what to write
// instead, when spec has no provider or one Open does not know.
func Open(spec string, opts Options) (agent.Model, error) {
	spec = strings.TrimSpace(spec)
	name, model, ok := strings.Cut(spec, ":")
	if ok && model == "" {
		return nil, fmt.Errorf("llm: %q names no model after the colon; write e.g. %sMODEL", spec, spec)
	}
	if !ok {
		if spec == "" {
			return nil, fmt.Errorf("llm: no model given; write provider:model, e.g. openai:gpt-4o-mini (providers: %s)", strings.Join(Providers(), ", "))
		}
		return nil, fmt.Errorf("llm: model %q has no provider; write provider:model, e.g. %s (providers: %s)", spec, guess(spec), strings.Join(Providers(), ", "))
	}
	p, ok := providers[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("llm: unknown provider %q in %q; use one of %s (an OpenAI-compatible server is openai:MODEL with a base URL)", name, spec, strings.Join(Providers(), ", "))
	}
	m, err := p.open(model, opts)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("llm: provider " + name + " returned no model")
	}
	return m, nil
}

// guess suggests a spec for a bare model name.
func guess(model string) string {
	switch l := strings.ToLower(model); {
	case strings.HasPrefix(l, "claude"):
		return "anthropic:" + model
	case strings.HasSuffix(l, ".yaml"), strings.HasSuffix(l, ".yml"), strings.HasSuffix(l, ".json"):
		return "scripted:" + model
	case strings.HasPrefix(l, "gpt"), strings.HasPrefix(l, "o1"), strings.HasPrefix(l, "o3"), strings.HasPrefix(l, "o4"):
		return "openai:" + model
	default:
		return "ollama:" + model
	}
}

// Providers returns the provider names Open accepts, sorted.
func Providers() []string {
	return slices.Sorted(maps.Keys(providers))
}

// Help returns one line per provider, "name  what it is", for a command's
// help text.
func Help() string {
	var b strings.Builder
	for _, n := range Providers() {
		fmt.Fprintf(&b, "  %-11s %s\n", n, providers[n].help)
	}
	return b.String()
}

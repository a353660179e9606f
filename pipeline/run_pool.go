package pipeline

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
)

// MemoryPrefix starts the names of history-tracked variables: a step
// output whose variable name begins with it is kept in the pool's memory,
// every value with the step that wrote it, instead of as a global.
const MemoryPrefix = "memory_"

// A Pool is a pipeline run's memory pool, after omni/UltraRAG's
// conventions:
//
//   - parameters ($name): read-only values given to the run (the file's
//     parameters, overridden by the run's own); steps never change them;
//   - globals (name): mutable variables, last write wins;
//   - memory (memory_*): history-tracked variables, each write kept with
//     the step that made it.
//
// A step's `$name` (omni) or `name` (UltraRAG) input reads the variable of
// that name (a global, or a memory variable's latest value) and, when no
// step wrote one, the parameter. A Pool is safe for concurrent use; the
// values it returns are shared and must be treated as read-only.
type Pool struct {
	mu      sync.Mutex
	params  map[string]any
	globals map[string]any
	memory  map[string][]MemoryWrite
}

// A MemoryWrite is one value written to a memory variable.
type MemoryWrite struct {
	Value any    `json:"value"`
	Step  int    `json:"step"`      // the step that wrote it, counted from 1 in the order steps ran
	Name  string `json:"step_name"` // that step's server.tool
}

// NewPool returns a pool holding params (copied) and no variables.
func NewPool(params map[string]any) *Pool {
	return &Pool{params: maps.Clone(params), globals: map[string]any{}, memory: map[string][]MemoryWrite{}}
}

// Get returns the value $name reads: the variable name if a step wrote it,
// else the parameter name.
func (p *Pool) Get(name string) (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.memory[name]; len(h) > 0 {
		return h[len(h)-1].Value, true
	}
	if v, ok := p.globals[name]; ok {
		return v, true
	}
	v, ok := p.params[name]
	return v, ok
}

// Param returns the parameter name.
func (p *Pool) Param(name string) (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.params[name]
	return v, ok
}

// History returns the writes of the memory variable name, oldest first,
// in a new slice.
func (p *Pool) History(name string) []MemoryWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.memory[name])
}

// Set writes a variable for step (its number and server.tool): a memory
// variable (name begins with MemoryPrefix) gains a history entry, any other
// name is a global. Parameters are not changed: a global of a parameter's
// name hides it from Get.
func (p *Pool) Set(name string, v any, step int, stepName string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasPrefix(name, MemoryPrefix) {
		p.memory[name] = append(p.memory[name], MemoryWrite{Value: v, Step: step, Name: stepName})
		return
	}
	p.globals[name] = v
}

// View returns every value a step can read, as one map: parameters,
// overlaid by globals and by the latest value of each memory variable.
// It is what a step without an input mapping is given.
func (p *Pool) View() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := maps.Clone(p.params)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, p.globals)
	for k, h := range p.memory {
		out[k] = h[len(h)-1].Value
	}
	return out
}

// Summary counts what the pool holds, as omni's get_memory_summary does:
// {"params": n, "globals": n, "memory": {"memory_x": writes, …}}.
func (p *Pool) Summary() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	mem := map[string]int{}
	for k, h := range p.memory {
		mem[k] = len(h)
	}
	return map[string]any{"params": len(p.params), "globals": len(p.globals), "memory": mem}
}

// MarshalJSON encodes the pool as
// {"params":{…},"globals":{…},"memory":{"memory_x":[{value,step,step_name}…]}}.
func (p *Pool) MarshalJSON() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return json.Marshal(struct {
		Params  map[string]any           `json:"params"`
		Globals map[string]any           `json:"globals"`
		Memory  map[string][]MemoryWrite `json:"memory"`
	}{p.params, p.globals, p.memory})
}

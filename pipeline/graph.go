package pipeline

import (
	"fmt"
	"strings"
)

// The step graph: a start node, a node per tool step, a hexagon per loop
// (inside a subgraph with its body; the body's ends go back to it, and it
// goes on "done"), a diamond per branch (edges to each branch labelled with
// the route tokens that select it; an empty branch's edge goes straight on),
// and an end node. Node ids number the nodes in file order, so the output
// is the same for the same file.

type graphNode struct {
	id, label, shape string // shape: "box", "round", "hexagon", "diamond"
	cluster          int    // innermost loop's cluster, 0 for none
}

type graphEdge struct {
	from, to, label string
	back            bool // a loop's back edge
}

type graphCluster struct {
	label  string
	parent int
}

type graph struct {
	nodes    []graphNode
	edges    []graphEdge
	clusters []graphCluster // index 0 is the top level
}

// exit is an edge waiting for the next step: from a node, with a label.
type exit struct{ from, label string }

func buildGraph(p *Pipeline) *graph {
	g := &graph{clusters: []graphCluster{{}}}
	start := g.node("start", "round", 0)
	exits := g.seq(p.Steps, 0, []exit{{from: start}})
	g.connect(exits, g.node("end", "round", 0), false)
	return g
}

func (g *graph) node(label, shape string, cluster int) string {
	id := fmt.Sprintf("n%d", len(g.nodes))
	if shape == "round" {
		// "end" is a keyword in Mermaid.
		id = map[string]string{"start": "start", "end": "finish"}[label]
	}
	g.nodes = append(g.nodes, graphNode{id: id, label: label, shape: shape, cluster: cluster})
	return id
}

// layout returns each cluster's nodes and child clusters, in order, so
// that writing the graph takes time linear in its size.
func (g *graph) layout() (nodes, kids [][]int) {
	nodes = make([][]int, len(g.clusters))
	kids = make([][]int, len(g.clusters))
	for i, n := range g.nodes {
		nodes[n.cluster] = append(nodes[n.cluster], i)
	}
	for i, c := range g.clusters[1:] {
		kids[c.parent] = append(kids[c.parent], i+1)
	}
	return nodes, kids
}

func (g *graph) connect(in []exit, to string, back bool) {
	for _, e := range in {
		g.edges = append(g.edges, graphEdge{from: e.from, to: to, label: e.label, back: back})
	}
}

func (g *graph) seq(steps []Step, cl int, in []exit) []exit {
	for _, s := range steps {
		in = g.step(s, cl, in)
	}
	return in
}

func (g *graph) step(s Step, cl int, in []exit) []exit {
	switch s := s.(type) {
	case *ToolStep:
		id := g.node(s.Name(), "box", cl)
		g.connect(in, id, false)
		return []exit{{from: id}}
	case *LoopStep:
		bound := "unbounded"
		if s.Max > 0 {
			bound = fmt.Sprintf("at most %d passes", s.Max)
		}
		g.clusters = append(g.clusters, graphCluster{label: "loop, " + bound, parent: cl})
		inner := len(g.clusters) - 1
		head := g.node("loop", "hexagon", inner)
		g.connect(in, head, false)
		body := g.seq(s.Steps, inner, []exit{{from: head}})
		for i := range body {
			if body[i].label == "" {
				body[i].label = "next pass"
			}
		}
		g.connect(body, head, true)
		return []exit{{from: head, label: "done"}}
	case *BranchStep:
		in = g.seq(s.RouterSteps, cl, in)
		label := "route"
		if len(s.RouterSteps) == 0 && s.Router != "" {
			label = s.Router
		}
		if s.Field != "" {
			label += " (" + s.Field + ")"
		}
		id := g.node(label, "diamond", cl)
		g.connect(in, id, false)
		var out []exit
		for _, b := range s.Branches {
			route := b.Name
			for _, m := range s.ValueMap {
				if m.Branch == b.Name {
					for _, t := range m.Tokens {
						route += ", " + t.Value
					}
				}
			}
			if len(b.Steps) == 0 {
				out = append(out, exit{from: id, label: route})
				continue
			}
			out = append(out, g.seq(b.Steps, cl, []exit{{from: id, label: route}})...)
		}
		if len(s.Branches) == 0 {
			out = append(out, exit{from: id})
		}
		return out
	}
	return in
}

// Mermaid returns the step graph as a Mermaid flowchart.
func (p *Pipeline) Mermaid() string {
	g := buildGraph(p)
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	nodes, kids := g.layout()
	g.mermaidCluster(&b, nodes, kids, 0, "  ")
	for _, e := range g.edges {
		arrow := "-->"
		if e.back {
			arrow = "-.->"
		}
		if e.label != "" {
			fmt.Fprintf(&b, "  %s %s|%s| %s\n", e.from, arrow, mermaidText(e.label), e.to)
		} else {
			fmt.Fprintf(&b, "  %s %s %s\n", e.from, arrow, e.to)
		}
	}
	return b.String()
}

func (g *graph) mermaidCluster(b *strings.Builder, nodes, kids [][]int, cl int, indent string) {
	for _, i := range nodes[cl] {
		n := g.nodes[i]
		open, close := "[", "]"
		switch n.shape {
		case "round":
			open, close = "([", "])"
		case "hexagon":
			open, close = "{{", "}}"
		case "diamond":
			open, close = "{", "}"
		}
		fmt.Fprintf(b, "%s%s%s%s%s\n", indent, n.id, open, mermaidText(n.label), close)
	}
	for _, i := range kids[cl] {
		fmt.Fprintf(b, "%ssubgraph loop%d [%s]\n", indent, i, mermaidText(g.clusters[i].label))
		g.mermaidCluster(b, nodes, kids, i, indent+"  ")
		fmt.Fprintf(b, "%send\n", indent)
	}
}

// mermaidText quotes s as a Mermaid label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "\n", " ")
	return `"` + r.Replace(s) + `"`
}

// DOT returns the step graph in Graphviz's DOT language.
func (p *Pipeline) DOT() string {
	g := buildGraph(p)
	var b strings.Builder
	b.WriteString("digraph pipeline {\n  rankdir=TB;\n  node [shape=box];\n")
	nodes, kids := g.layout()
	g.dotCluster(&b, nodes, kids, 0, "  ")
	for _, e := range g.edges {
		var attrs []string
		if e.label != "" {
			attrs = append(attrs, "label="+dotText(e.label))
		}
		if e.back {
			attrs = append(attrs, "style=dashed", "constraint=false")
		}
		if len(attrs) > 0 {
			fmt.Fprintf(&b, "  %s -> %s [%s];\n", e.from, e.to, strings.Join(attrs, ", "))
		} else {
			fmt.Fprintf(&b, "  %s -> %s;\n", e.from, e.to)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func (g *graph) dotCluster(b *strings.Builder, nodes, kids [][]int, cl int, indent string) {
	for _, i := range nodes[cl] {
		n := g.nodes[i]
		shape := n.shape
		if shape == "round" {
			shape = "oval"
		}
		fmt.Fprintf(b, "%s%s [shape=%s, label=%s];\n", indent, n.id, shape, dotText(n.label))
	}
	for _, i := range kids[cl] {
		fmt.Fprintf(b, "%ssubgraph cluster_loop%d {\n%s  label=%s;\n", indent, i, indent, dotText(g.clusters[i].label))
		g.dotCluster(b, nodes, kids, i, indent+"  ")
		fmt.Fprintf(b, "%s}\n", indent)
	}
}

// dotText quotes s as a DOT string.
func dotText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

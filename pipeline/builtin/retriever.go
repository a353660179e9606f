package builtin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite", with FTS5
)

// Limits on what the retriever reads from a documents directory, so that
// pointing it at the wrong folder fails fast instead of filling memory.
const (
	MaxDocumentFiles = 10000
	MaxDocumentBytes = 1 << 20 // per file; larger files are skipped
)

// documentExts are the file types read from a documents directory.
var documentExts = map[string]bool{".txt": true, ".md": true, ".markdown": true, ".rst": true, ".text": true}

// Retriever is the built-in retriever server: an in-memory SQLite FTS5
// index (Porter-stemmed words, BM25 ranking) with these tools:
//
//   - index: adds documents (a list of strings, or of objects with text or
//     content and an optional id) or the text files of documents_dir
//     (.txt, .md, .rst; each paragraph a passage whose id is
//     "path#n") to collection (default "default");
//   - search: the top_k (default 5) passages of collection for query, by
//     BM25; the result holds results (id, text, score) and count;
//   - hybrid_search: the same, ranked by half BM25 (scaled to the best
//     hit) and half the share of the query's content words the passage
//     contains. There are no embeddings offline: the second half stands in
//     for a dense score, and a real vector retriever is an MCP server;
//   - get_stats: how many passages each collection holds.
//
// A search on an empty index first indexes the documents or documents_dir
// the call was given (a step without an input mapping gets the pipeline's
// parameters), or else the directory the Retriever was made with; with
// nothing to index it fails saying how to give documents.
//
// A Retriever is safe for concurrent use. Close frees the index.
type Retriever struct {
	dir    string
	hybrid bool // search ranks as hybrid_search (runtime.retrieval.default_backend: hybrid)

	mu sync.Mutex
	db *sql.DB
	n  int // passages indexed
}

// NewRetriever returns a Retriever with an empty index. dir, if not
// empty, is the directory an empty index is filled from on first search.
func NewRetriever(dir string) (*Retriever, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("retriever: opening its index: %w", err)
	}
	// Each connection to ":memory:" is a database of its own: keep one.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE passages USING fts5(id UNINDEXED, collection UNINDEXED, text, tokenize='porter unicode61')`); err != nil {
		db.Close()
		return nil, fmt.Errorf("retriever: creating its FTS5 index: %w", err)
	}
	return &Retriever{dir: dir, db: db}, nil
}

// searchReads are the arguments search and hybrid_search read.
var searchReads = []string{"query", "question", "topic", "top_k", "collection", "documents", "documents_dir", "docs_dir", "corpus_dir"}

// Tools returns the retriever's tools.
func (r *Retriever) Tools() []Tool {
	return sortedTools([]Tool{
		{Name: "index", Description: "Index documents (a list) or the text files of documents_dir into a collection.",
			Reads: []string{"documents", "documents_dir", "docs_dir", "corpus_dir", "collection"}, Writes: []string{"indexed", "collection", "total"}},
		{Name: "search", Description: "The top_k passages for query, ranked by BM25.",
			Reads: searchReads, Writes: []string{"results", "count"}},
		{Name: "hybrid_search", Description: "The top_k passages for query, ranked by BM25 and query-term coverage.",
			Reads: searchReads, Writes: []string{"results", "count"}},
		{Name: "get_stats", Description: "How many passages each collection holds.", Writes: []string{"collections", "total"}},
	})
}

// Close frees the index.
func (r *Retriever) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.db == nil {
		return nil
	}
	err := r.db.Close()
	r.db = nil
	return err
}

// Call runs one of the retriever's tools.
func (r *Retriever) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.db == nil {
		return nil, errors.New("retriever: the server is closed")
	}
	collection, _ := firstString(args, "collection")
	if collection == "" {
		collection = "default"
	}
	switch tool {
	case "index":
		n, err := r.index(ctx, collection, args, "")
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("retriever.index: %w: no documents: give documents (a list of texts) or documents_dir (a folder of .txt/.md files)", ErrMissingArg)
		}
		return map[string]any{"indexed": n, "collection": collection, "total": r.n}, nil
	case "search", "hybrid_search":
		return r.search(ctx, tool, collection, args)
	case "get_stats":
		return r.stats(ctx)
	}
	return nil, errUnknownTool("retriever", tool, r.Tools())
}

// index adds the documents args give (or dir's files, if args give none and
// dir is not empty) to collection and returns how many passages it added.
func (r *Retriever) index(ctx context.Context, collection string, args map[string]any, dir string) (int, error) {
	type passage struct{ id, text string }
	var ps []passage
	if docs, ok := args["documents"].([]any); ok {
		for i, d := range docs {
			t := texts(d)
			if len(t) == 0 {
				return 0, fmt.Errorf("retriever.index: document %d has no text: give a string or an object with text or content", i+1)
			}
			id := fmt.Sprintf("doc%d", i+1)
			if m, ok := d.(map[string]any); ok {
				if s, k := firstString(m, "id", "title"); k != "" {
					id = s
				}
			}
			ps = append(ps, passage{id, t[0]})
		}
	} else if s, ok := args["documents"].(string); ok && strings.TrimSpace(s) != "" {
		ps = append(ps, passage{"doc1", s})
	} else {
		if d, k := firstString(args, "documents_dir", "docs_dir", "corpus_dir"); k != "" {
			dir = d
		}
		if dir != "" {
			files, err := readDocuments(dir)
			if err != nil {
				return 0, err
			}
			for _, f := range files {
				for i, para := range paragraphs(f.text) {
					ps = append(ps, passage{fmt.Sprintf("%s#%d", f.path, i+1), para})
				}
			}
		}
	}
	if len(ps) == 0 {
		return 0, nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("retriever.index: %w", err)
	}
	defer tx.Rollback()
	for _, p := range ps {
		if _, err := tx.ExecContext(ctx, `INSERT INTO passages(id, collection, text) VALUES (?, ?, ?)`, p.id, collection, p.text); err != nil {
			return 0, fmt.Errorf("retriever.index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("retriever.index: %w", err)
	}
	r.n += len(ps)
	return len(ps), nil
}

type docFile struct{ path, text string }

// readDocuments reads the text files under dir, in path order.
func readDocuments(dir string) ([]docFile, error) {
	var out []docFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !documentExts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		if len(out) == MaxDocumentFiles {
			return fmt.Errorf("more than %d text files", MaxDocumentFiles)
		}
		info, err := d.Info()
		if err != nil || info.Size() > MaxDocumentBytes {
			return nil // unreadable or too large: not a passage source
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, docFile{filepath.ToSlash(rel), string(b)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retriever: reading documents_dir %s: %w", dir, err)
	}
	return out, nil
}

// paragraphs splits text at blank lines into passages, dropping empty ones
// and joining the lines of each.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// search runs search or hybrid_search.
func (r *Retriever) search(ctx context.Context, tool, collection string, args map[string]any) (map[string]any, error) {
	query, _ := firstString(args, "query", "question", "topic")
	if query == "" {
		return nil, fmt.Errorf("retriever.%s: %w: query", tool, ErrMissingArg)
	}
	topK := 5
	if k, ok := number(args, "top_k"); ok {
		if k < 1 || k != float64(int(k)) {
			return nil, fmt.Errorf("retriever.%s: top_k is %v: want a whole number of at least 1", tool, k)
		}
		topK = int(min(k, 1000))
	}
	if r.n == 0 {
		n, err := r.index(ctx, collection, args, r.dir)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("retriever.%s: the index is empty and the call gave no documents: index some first (retriever.index), or give documents (a list of texts) or documents_dir (a folder of .txt/.md files) as a pipeline parameter, e.g. --param documents_dir=./docs", tool)
		}
	}
	qterms := terms(query)
	if len(qterms) == 0 {
		return nil, fmt.Errorf("retriever.%s: query %q has no words to search for", tool, query)
	}
	quoted := make([]string, len(qterms))
	for i, t := range qterms {
		quoted[i] = `"` + t + `"`
	}
	hybrid := tool == "hybrid_search" || r.hybrid
	limit := topK
	if hybrid {
		limit = max(topK*4, 20) // rerank a wider set
	}
	rows, err := r.db.QueryContext(ctx, `SELECT id, text, -bm25(passages) FROM passages WHERE passages MATCH ? AND collection = ? ORDER BY bm25(passages), id LIMIT ?`,
		strings.Join(quoted, " OR "), collection, limit)
	if err != nil {
		return nil, fmt.Errorf("retriever.%s: %w", tool, err)
	}
	defer rows.Close()
	type hit struct {
		id, text string
		score    float64
	}
	var hits []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.id, &h.text, &h.score); err != nil {
			return nil, fmt.Errorf("retriever.%s: %w", tool, err)
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retriever.%s: %w", tool, err)
	}
	if hybrid && len(hits) > 0 {
		best := hits[0].score
		for i := range hits {
			have := map[string]bool{}
			for _, t := range tokens(hits[i].text) {
				have[t] = true
			}
			n := 0
			for _, t := range qterms {
				if have[t] {
					n++
				}
			}
			lex := 0.0
			if best > 0 {
				lex = hits[i].score / best
			}
			hits[i].score = 0.5*lex + 0.5*float64(n)/float64(len(qterms))
		}
		sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
		hits = hits[:min(len(hits), topK)]
	}
	results := make([]any, len(hits))
	for i, h := range hits {
		results[i] = map[string]any{"id": h.id, "text": h.text, "score": round4(h.score)}
	}
	return map[string]any{"results": results, "count": len(results)}, nil
}

// stats counts passages by collection.
func (r *Retriever) stats(ctx context.Context) (map[string]any, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT collection, count(*) FROM passages GROUP BY collection ORDER BY collection`)
	if err != nil {
		return nil, fmt.Errorf("retriever.get_stats: %w", err)
	}
	defer rows.Close()
	cols := map[string]any{}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return nil, fmt.Errorf("retriever.get_stats: %w", err)
		}
		cols[c] = n
	}
	return map[string]any{"collections": cols, "total": r.n}, rows.Err()
}

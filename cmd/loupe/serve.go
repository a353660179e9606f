package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/alert"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/ui"
)

func newServeCmd() *cobra.Command {
	var (
		addr          string
		grpcAddr      string
		requireKeys   bool
		noRedact      bool
		redactWithout []string
		redactKeys    []string
		noUI          bool
		open          bool
		mcpf          mcpFlags
		pricesFile    string
		readDB        string
		publicHosts   []string
		origins       []string
		retain        time.Duration
		monitorsArgs  []string
		uiURL         string

		branchModels  []string
		branchMaxCost float64

		rulesArgs []string
	)
	cmd := &cobra.Command{
		Use:         "serve",
		Short:       "Run the collector: ingest (Loupe records, OTLP/HTTP and OTLP/gRPC), the JSON API and live streams",
		Annotations: map[string]string{serverWideAnnotation: "true"},
		Long: `Run the collector on one port: POST /v1/records (Loupe records), POST
/v1/traces and POST /v1/logs (OTLP/HTTP, protobuf or JSON: point any
OpenTelemetry SDK at http://127.0.0.1:4318; log records join the traces they
were written in), the JSON API under /api/v1 (its OpenAPI document at
/api/v1/openapi.json), live streams, Loupe's MCP server at /mcp (streamable
HTTP; see loupe mcp; --mcp-config sets what it runs) and the web UI at /
(--no-ui to leave it out). OTLP/gRPC trace and logs export is served on a second
port, --grpc-addr (127.0.0.1:4317 by default when --addr is on loopback;
"" turns it off), with API keys sent as the metadata authorization: Bearer
<key>. It stores into the same store as the other commands (--db /
LOUPE_DB); with --read-db, the queries over traces and scores go to a
read replica of it. It listens on loopback by default; any other address (either
one) requires API keys (loupe keys create). With --rules FILE, the traces
that end are graded online by the file's rules (and by those added at
/api/v1/rules), and the results stored as scores; --monitors FILE stores and
evaluates the file's monitors. Both apply to the default project; give
another project its own with --rules PROJECT=FILE and --monitors
PROJECT=FILE (repeatable; the project must exist, see loupe projects), which
opens that project at start. Every project (loupe projects) is served; DELETE
/api/v1/projects/NAME deletes one. SIGINT or SIGTERM stops it after the
requests in flight are committed and answered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return withStore(cmd, func(_ context.Context, st store.Store) error {
				if readDB != "" {
					replica, err := store.OpenReadOnly(ctx, readDB)
					if err != nil {
						return fmt.Errorf("--read-db: %w", err)
					}
					defer replica.Close()
					if st, err = store.Split(st, replica); err != nil {
						return fmt.Errorf("--read-db: %w", err)
					}
				}
				grpcDefault := !cmd.Flags().Changed("grpc-addr")
				if grpcDefault {
					grpcAddr = defaultGRPCAddr(addr)
				}
				public := addr // the address that needs keys, in errors
				if server.IsLoopback(addr) && grpcAddr != "" && !server.IsLoopback(grpcAddr) {
					public = grpcAddr
				}
				requireKeys := requireKeys || !server.IsLoopback(addr) || grpcAddr != "" && !server.IsLoopback(grpcAddr)
				if requireKeys {
					keys, err := server.Keys(ctx, st)
					if err != nil {
						return fmt.Errorf("listening on %s needs API keys: %w", public, err)
					}
					if len(keys) == 0 {
						return fmt.Errorf("serving on %s requires API keys (off loopback, or --require-keys), and the store has none: create one with loupe keys create --scope ingest (and --scope read)", public)
					}
				}
				prices, err := loadPrices(pricesFile) // the built-in table, under --prices or LOUPE_PRICES
				if err != nil {
					return err
				}
				if len(publicHosts) > 0 && !requireKeys {
					return fmt.Errorf("--public-host %s: serving a public name requires API keys (--require-keys, and loupe keys create)", strings.Join(publicHosts, ","))
				}
				rulesFile, projectRules, err := projectFiles("--rules", rulesArgs)
				if err != nil {
					return err
				}
				monitorsFile, projectMonitors, err := projectFiles("--monitors", monitorsArgs)
				if err != nil {
					return err
				}
				if err := checkProjectsExist(ctx, st, projectRules, projectMonitors); err != nil {
					return err
				}
				o := server.Options{Store: st, RequireKeys: requireKeys, Prices: prices, Hosts: publicHosts, TrustedOrigins: origins, Retain: retain,
					BranchModels: branchModels, BranchMaxCostUSD: branchMaxCost}
				eng, err := openOnline(st, rulesFile, prices)
				if err != nil {
					return err
				}
				if eng != nil {
					defer func() {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						eng.Close(ctx) // lets the evaluations in flight finish; the checkpoint keeps the rest
					}()
					o.Online = eng
				}
				if !noUI {
					o.UI = ui.Handler()
				}
				var rd *redact.Redactor
				if !noRedact {
					if err := checkRuleNames(redactWithout); err != nil {
						return err
					}
					if rd, err = redact.New(redact.DefaultConfig().Without(redactWithout...).WithKeys(redactKeys...)); err != nil {
						return err
					}
					o.Redact = rd.Record
				}
				ms, err := newMCPServer(ctx, mcpf, st, rd)
				if err != nil {
					return fmt.Errorf("the MCP server at /mcp: %w", err)
				}
				defer ms.Close()
				// Close ends its event streams, which the shutdown would wait for.
				defer context.AfterFunc(ctx, func() { ms.Close() })()
				o.MCP = ms.Handler()
				var sources map[string]alert.Source
				if eng != nil {
					sources = map[string]alert.Source{"online_dropped": eng.DroppedIn}
				}
				engine, stopMonitors, err := startMonitors(ctx, st, monitorsFile, cmp.Or(uiURL, "http://"+addr+"/"), sources)
				if err != nil {
					return err
				}
				defer stopMonitors()
				o.Alerts = engine
				o.Projects = projectOpener(ctx, dbDSN(cmd), projectParts{prices: prices, redactor: rd, mcp: mcpf, uiURL: cmp.Or(uiURL, "http://"+addr+"/"), readDSN: readDB,
					rules: projectRules, monitors: projectMonitors})
				dsn := dbDSN(cmd)
				o.DropProject = func(ctx context.Context, name string) error { return store.DropProject(ctx, dsn, name) }
				srv, err := server.New(o)
				if err != nil {
					return err
				}
				// The projects given files are opened now, so that their
				// monitors run and their rules grade from the start, and
				// a file's errors stop loupe serve before it listens.
				for _, name := range slices.Sorted(maps.Keys(mergeKeys(projectRules, projectMonitors))) {
					if err := srv.OpenProject(ctx, name); err != nil {
						srv.Close()
						return fmt.Errorf("project %s: %w", name, err)
					}
				}
				var grpcLn net.Listener
				if grpcAddr != "" {
					// Listen before the HTTP server starts, so that a taken
					// port is reported first. The default port, when taken
					// (another collector), only costs the gRPC endpoint.
					if grpcLn, err = net.Listen("tcp", grpcAddr); err != nil {
						if !grpcDefault {
							return fmt.Errorf("--grpc-addr: %w", err)
						}
						fmt.Fprintf(cmd.ErrOrStderr(), "loupe serve: no OTLP/gRPC: %v (set --grpc-addr to another address, or \"\" to turn it off)\n", err)
					}
				}
				if grpcLn == nil {
					return server.Serve(ctx, addr, srv, httpReady(cmd, requireKeys, open && !noUI))
				}
				// Both until ctx ends; either failing stops the other.
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				grpcErr := make(chan error, 1)
				go func() {
					grpcErr <- server.ServeGRPCListener(ctx, grpcLn, srv, func(a net.Addr) {
						fmt.Fprintf(cmd.ErrOrStderr(), "loupe serve: OTLP/gRPC on %s\n", a)
					})
					cancel()
				}()
				err = server.Serve(ctx, addr, srv, httpReady(cmd, requireKeys, open && !noUI))
				cancel()
				if gerr := <-grpcErr; err == nil && gerr != nil {
					err = fmt.Errorf("OTLP/gRPC: %w", gerr)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:4318", "address to listen on (host:port); a non-loopback address requires API keys")
	cmd.Flags().StringVar(&grpcAddr, "grpc-addr", "127.0.0.1:4317", "address to serve OTLP/gRPC trace and logs export on; the default applies only when --addr is on loopback (then on its host), \"\" turns it off, and a non-loopback address requires API keys")
	cmd.Flags().StringVar(&readDB, "read-db", "", "a read replica of --db (a PostgreSQL hot standby), opened read-only: the queries over traces and scores (web UI, API, MCP) go to it, writes, keys and settings to --db")
	cmd.Flags().BoolVar(&noUI, "no-ui", false, "do not serve the web UI at /")
	pricesFlag(cmd, &pricesFile)
	cmd.Flags().BoolVar(&open, "open", false, "open the web UI in a browser once listening")
	cmd.Flags().BoolVar(&requireKeys, "require-keys", false, "require API keys on loopback too")
	cmd.Flags().StringSliceVar(&publicHosts, "public-host", nil, "host names (without port) the server answers besides loopback ones; needs API keys. With keys and no --public-host, any Host is answered")
	cmd.Flags().Var(durationValue{&retain}, "retain", "delete traces whose run started longer ago than this (30d, 720h), at start and then hourly, in short transactions; off by default")
	cmd.Flags().StringArrayVar(&monitorsArgs, "monitors", nil, "a YAML file of monitors (alerts with webhooks) to store and evaluate in the default project, or PROJECT=FILE for another project (repeatable, one file per project); every collector on the store evaluates the monitors it holds")
	cmd.Flags().StringVar(&uiURL, "ui-url", "", "the web UI's URL as its readers reach it, for the links in alert notifications (default http://ADDR/)")

	cmd.Flags().StringArrayVar(&rulesArgs, "rules", nil, "online evaluation: grade the traces that end in the default project with the rules of this YAML file (filters, sampling, AgentV graders, an LLM judge), or those of another project with PROJECT=FILE (repeatable, one file per project); rules can also be added at /api/v1/rules")
	cmd.Flags().StringSliceVar(&origins, "trusted-origin", nil, "browser origins (e.g. https://ui.example.com) allowed to POST and DELETE besides the server's own")
	cmd.Flags().BoolVar(&noRedact, "no-redact", false, "store ingested records as they arrive, without scrubbing secrets (API keys, tokens, passwords)")
	cmd.Flags().StringSliceVar(&redactWithout, "redact-without", nil, "turn off these redaction rules by name (e.g. jwt,aws-secret); see package redact")
	cmd.Flags().StringSliceVar(&redactKeys, "redact-keys", nil, "also redact the values of JSON fields with these names (e.g. ssn,customer_email)")
	cmd.Flags().StringSliceVar(&branchModels, "branch-models", nil, "models (provider:model, as --model of loupe replay) an admin may re-run a stored run from a step with, in the web UI or POST /api/v1/traces/{id}/branch; none by default")
	cmd.Flags().Float64Var(&branchMaxCost, "branch-max-cost", 1, "USD that the live steps of one branch may spend (0: no limit); a model without a price cannot be held to it and stops the branch")
	mcpf.add(cmd, "mcp-")
	return cmd
}

// projectParts is what every project of loupe serve is opened with.
type projectParts struct {
	prices   *price.Table
	redactor *redact.Redactor
	mcp      mcpFlags
	uiURL    string
	readDSN  string            // --read-db: each project's queries go to its schema on the replica
	rules    map[string]string // --rules PROJECT=FILE
	monitors map[string]string // --monitors PROJECT=FILE
}

// projectFiles reads the values of flag (--rules, --monitors): FILE for
// the default project, PROJECT=FILE for another. A value is PROJECT=FILE
// when what comes before its first "=" is a project name (a file whose
// name has such a prefix is given as default=FILE). Each project, the
// default one included, takes one file.
func projectFiles(flag string, vals []string) (def string, per map[string]string, err error) {
	per = map[string]string{}
	seen := map[string]bool{}
	for _, v := range vals {
		project, file := store.DefaultProject, v
		if p, f, ok := strings.Cut(v, "="); ok && (p == store.DefaultProject || store.CheckProject(p) == nil) {
			project, file = p, f
		}
		if file == "" {
			return "", nil, fmt.Errorf("%s %s: no file; give %s FILE for the default project, or %s PROJECT=FILE", flag, v, flag, flag)
		}
		if seen[project] {
			return "", nil, fmt.Errorf("%s: project %s is given two files; give one (put every rule or monitor of a project in its file)", flag, project)
		}
		seen[project] = true
		if project == store.DefaultProject {
			def = file
		} else {
			per[project] = file
		}
	}
	return def, per, nil
}

// checkProjectsExist reports the projects of --rules and --monitors that
// st does not list.
func checkProjectsExist(ctx context.Context, st store.Store, rules, monitors map[string]string) error {
	if len(rules)+len(monitors) == 0 {
		return nil
	}
	ps, err := server.Projects(ctx, st)
	if err != nil {
		return fmt.Errorf("listing the projects: %w", err)
	}
	known := map[string]bool{}
	for _, p := range ps {
		known[p.Name] = true
	}
	for _, c := range []struct {
		flag  string
		files map[string]string
	}{{"--rules", rules}, {"--monitors", monitors}} {
		for _, name := range slices.Sorted(maps.Keys(c.files)) {
			if !known[name] {
				return fmt.Errorf("%s %s=%s: there is no project %s in this store (loupe projects ls lists them; loupe projects add %s makes it)", c.flag, name, c.files[name], name, name)
			}
		}
	}
	return nil
}

// mergeKeys returns the keys of a and b.
func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// projectOpener opens a project of loupe serve as the default project is
// opened: its store beside dsn's, its rules (those of its --rules file and
// those made through the API), its monitors (those of its --monitors file
// and the stored ones, evaluated until ctx ends) and its MCP server.
func projectOpener(ctx context.Context, dsn string, pp projectParts) server.ProjectOpener {
	return func(_ context.Context, name string) (_ *server.Project, err error) {
		pdsn, err := store.ProjectDSN(dsn, name)
		if err != nil {
			return nil, err
		}
		st, err := store.Open(ctx, pdsn)
		if err != nil {
			return nil, err
		}
		var closers []func()
		defer func() {
			if err != nil {
				for i := len(closers) - 1; i >= 0; i-- {
					closers[i]()
				}
			}
		}()
		closers = append(closers, func() { st.Close() })
		if pp.readDSN != "" {
			rdsn, err := store.ProjectDSN(pp.readDSN, name)
			if err != nil {
				return nil, err
			}
			replica, err := store.OpenReadOnly(ctx, rdsn) // the project's schema, once the replica has replayed its making
			if err != nil {
				return nil, fmt.Errorf("--read-db: project %s: %w", name, err)
			}
			closers = append(closers, func() { replica.Close() })
			if st, err = store.Split(st, replica); err != nil {
				return nil, fmt.Errorf("--read-db: project %s: %w", name, err)
			}
		}
		p := &server.Project{Store: st}
		if p.Online, err = openOnline(st, pp.rules[name], pp.prices); err != nil {
			return nil, err
		}
		var sources map[string]alert.Source
		if eng := p.Online; eng != nil {
			closers = append(closers, func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				eng.Close(ctx)
			})
			sources = map[string]alert.Source{"online_dropped": eng.DroppedIn}
		}
		ms, err := newMCPServer(ctx, pp.mcp, st, pp.redactor)
		if err != nil {
			return nil, fmt.Errorf("the MCP server at /mcp: %w", err)
		}
		closers = append(closers, func() { ms.Close() })
		p.MCP = ms.Handler()
		engine, stop, err := startMonitors(ctx, st, pp.monitors[name], server.ProjectURL(pp.uiURL, name), sources)
		if err != nil {
			return nil, err
		}
		closers = append(closers, stop)
		p.Alerts = engine
		p.Close = func() error {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
			return nil
		}
		return p, nil
	}
}

// startMonitors runs the monitors' engine over st when the store keeps
// monitors, after storing those of file (if given); nil when the store
// keeps none and no file is given. stop ends the evaluations and the
// deliveries in flight.
func startMonitors(ctx context.Context, st store.Store, file, uiURL string, sources map[string]alert.Source) (e *alert.Engine, stop func(), err error) {
	stop = func() {}
	var ms []alert.Monitor
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, stop, fmt.Errorf("--monitors: %w", err)
		}
		known := func(name string) bool { _, ok := sources[name]; return ok }
		if ms, err = alert.ParseFile(data, file, known); err != nil {
			return nil, stop, fmt.Errorf("--monitors: %w", err)
		}
	}
	e, err = alert.New(alert.Options{Store: st, UIURL: uiURL, Sources: sources})
	if err != nil {
		if file == "" {
			return nil, stop, nil
		}
		return nil, stop, fmt.Errorf("--monitors: %w", err)
	}
	for _, m := range ms {
		if err := e.Put(ctx, m); err != nil {
			e.Close()
			return nil, stop, fmt.Errorf("--monitors: %s: monitor %s: %w", file, m.Name, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	return e, func() { cancel(); <-done; e.Close() }, nil
}

// openOnline starts online evaluation for loupe serve: the rules of
// rulesFile (checked before anything listens), and the rules made through
// the API. Without a rules file it starts only when the store keeps
// scores; with one, a store that cannot is an error.
func openOnline(st store.Store, rulesFile string, prices *price.Table) (*online.Engine, error) {
	var cfg *online.Config
	if rulesFile != "" {
		var err error
		if cfg, err = online.ParseFile(rulesFile); err != nil {
			return nil, fmt.Errorf("--rules: %w", err)
		}
	}
	if _, ok := st.(store.Scorer); !ok {
		if rulesFile != "" {
			return nil, fmt.Errorf("--rules %s: this store cannot keep scores, which online evaluation stores its results as", rulesFile)
		}
		return nil, nil
	}
	eng, err := online.New(online.Options{Store: st, Config: cfg, Prices: prices})
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	return eng, nil
}

// defaultGRPCAddr is --grpc-addr when it is not given: OTLP/gRPC's port
// 4317 on the host of addr (--addr) when that is loopback, none otherwise
// (serving gRPC off loopback is asked for, not implied). With --addr on
// port 0 (any free port, as tests use) it is port 0 too.
func defaultGRPCAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !server.IsLoopback(addr) {
		return ""
	}
	if port != "0" {
		port = "4317"
	}
	return net.JoinHostPort(host, port)
}

// httpReady is what loupe serve says once its HTTP port listens, and
// --open.
func httpReady(cmd *cobra.Command, requireKeys, open bool) func(net.Addr) {
	return func(a net.Addr) {
		auth := "no API keys (loopback)"
		if requireKeys {
			auth = "API keys required"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "loupe serve: listening on http://%s, %s, store %s\n", a, auth, store.Redact(dbDSN(cmd)))
		if open {
			if err := openBrowser(uiURL(a)); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "loupe serve: --open: %v; open %s yourself\n", err, uiURL(a))
			}
		}
	}
}

// uiURL is the address of the web UI on a listener: an unspecified host
// (0.0.0.0, ::) is reached through loopback.
func uiURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// openBrowser asks the desktop to open url, without waiting for the
// browser.
func openBrowser(url string) error {
	var c *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		c = exec.Command("open", url)
	case "windows":
		c = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		c = exec.Command("xdg-open", url)
	}
	if err := c.Start(); err != nil {
		return err
	}
	go c.Wait() // reap it
	return nil
}

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:         "keys",
		Short:       "Create, list and revoke the collector's API keys (kept hashed in the store)",
		Annotations: map[string]string{serverWideAnnotation: "true"},
	}
	var scope, name string
	var projects []string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it (it is shown once)",
		Long: `Create an API key for loupe serve and print it; only its SHA-256 is stored.
Scopes: ingest (POST /v1/records, /v1/traces and /v1/logs only), read (the API and
streams only), admin (everything, deleting traces included). Send it as
Authorization: Bearer <key>, e.g. OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer <key>".
A key belongs to the projects --projects names (the default project when
none; '*' for every project, which an admin key needs to make and delete
projects);
its requests go to the first unless they name another (the Loupe-Project
header, or the OTLP resource attribute loupe.project).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := server.ParseScope(scope)
			if err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				tok, k, err := server.CreateKey(ctx, st, sc, name, time.Now(), projects...)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				fmt.Fprintf(cmd.ErrOrStderr(), "created %s key %s; it is not shown again\n", k.Scope, k.ID)
				return nil
			})
		},
	}
	create.Flags().StringVar(&scope, "scope", "", "ingest, read or admin (required)")
	create.Flags().StringVar(&name, "name", "", "a label to recognize the key by")
	create.Flags().StringSliceVar(&projects, "projects", nil, "the projects the key may use, the first by default (e.g. team_a,team_b, or '*' for all); default: the default project")
	_ = create.MarkFlagRequired("scope")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List API keys (ids, scopes, names; never the keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				keys, err := server.Keys(ctx, st)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSCOPE\tPROJECTS\tCREATED\tNAME")
				for _, k := range keys {
					ps := strings.Join(k.Projects, ",")
					if ps == "" {
						ps = store.DefaultProject
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Scope, ps, k.Created.Format(time.RFC3339), k.Name)
				}
				return tw.Flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke API keys by id (every server sharing the store refuses them at once)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				for _, id := range args {
					if err := server.RevokeKey(ctx, st, id); err != nil {
						return err
					}
					fmt.Fprintln(cmd.ErrOrStderr(), "revoked", id)
				}
				return nil
			})
		},
	}
	cmd.AddCommand(create, ls, revoke)
	return cmd
}

// checkRuleNames reports names that are not rules of the default
// redaction, so that a typo in --redact-without does not quietly keep
// the rule on.
func checkRuleNames(names []string) error {
	known := map[string]bool{}
	var all []string
	for _, r := range redact.DefaultConfig().Rules {
		known[r.Name] = true
		all = append(all, r.Name)
	}
	for _, n := range names {
		if !known[n] {
			return fmt.Errorf("--redact-without: no redaction rule is named %q; the rules are %s", n, strings.Join(all, ", "))
		}
	}
	return nil
}

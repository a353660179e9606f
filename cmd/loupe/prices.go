package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/loupe-dev/loupe/price"
	"github.com/spf13/cobra"
)

// newPricesCmd wires the price package to the command line; the table and
// its matching rules live in package price.
func newPricesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prices",
		Short: "Show the model prices Loupe computes costs with",
	}
	var (
		file   string
		asJSON bool
	)
	ls := &cobra.Command{
		Use:   "ls [MODEL]",
		Short: "List model prices (USD per million tokens), or the price a model name resolves to",
		Long: "List the built-in price table, overridden by the price file given with --prices or " + price.EnvFile + ".\n" +
			"With MODEL, show the entry that name matches (version suffixes and aliases are resolved);\n" +
			"a model with no entry has an unknown cost, which Loupe never shows as $0.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := loadPrices(file)
			if err != nil {
				return err
			}
			ps := tb.All()
			if len(args) == 1 {
				p, ok := tb.Lookup(args[0])
				if !ok {
					return fmt.Errorf("no price for model %q: its cost is unknown; add it to a price file (--prices or %s)", args[0], price.EnvFile)
				}
				ps = []price.Price{p}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				e := json.NewEncoder(out)
				e.SetIndent("", "  ")
				return e.Encode(map[string]any{"models": ps})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "MODEL\tPROVIDER\tINPUT\tCACHED READ\tCACHE WRITE\tOUTPUT\tREASONING\tVALID FROM\tALIASES")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Model, dash(p.Provider),
					usd(p.Input), usd(or0(p.CachedInput, p.Input)), usd(or0(p.CacheWrite, p.Input)),
					usd(p.Output), usd(or0(p.Reasoning, p.Output)), dash(p.ValidFrom), dash(strings.Join(p.Aliases, ",")))
			}
			return w.Flush()
		},
	}
	pricesFlag(ls, &file)
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON in the price file format")
	cmd.AddCommand(ls)
	return cmd
}

func usd(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

func or0(v, fallback float64) float64 {
	if v == 0 {
		return fallback
	}
	return v
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pricesFlag adds --prices, the price file overriding the built-in table,
// to cmd; every command that prices calls (prices ls, serve, traces
// import) takes it, with the same default.
func pricesFlag(cmd *cobra.Command, file *string) {
	cmd.Flags().StringVar(file, "prices", "", "price file overriding the built-in table (default $"+price.EnvFile+")")
}

// loadPrices returns the built-in table under the price file named by
// --prices (file), or else by $LOUPE_PRICES.
func loadPrices(file string) (*price.Table, error) {
	if file == "" {
		file = os.Getenv(price.EnvFile)
	}
	return price.Load(file)
}

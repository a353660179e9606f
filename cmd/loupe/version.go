package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version and date may be set at build time with
// -ldflags "-X main.version=v1.2.3 -X main.date=2026-11-23T09:00:00Z";
// otherwise they come from the module's build info (see versionString).
var (
	version = ""
	date    = ""
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print loupe's version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "loupe", versionString())
		},
	}
}

// versionString describes this binary from debug.ReadBuildInfo and the
// link-time overrides.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi, version, date)
}

// formatVersion renders "v1.2.3 (commit 0123456789ab, built 2026-…, go1.x)".
// Go records no build time, so without -X main.date the date is the
// commit's time (vcs.time), labelled as such. A binary built from a checkout
// has module version "(devel)": then the commit is what identifies it, and
// "modified" says the tree had uncommitted changes. bi may be nil (a
// binary built without module support).
func formatVersion(bi *debug.BuildInfo, ldVersion, ldDate string) string {
	v := ldVersion
	var rev, vcsTime, goVer string
	modified := false
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		goVer = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
		if rev == "" {
			v = "devel (built from a checkout without version control information)"
		}
	}
	var details []string
	if rev != "" {
		c := "commit " + rev[:min(12, len(rev))]
		if modified {
			c += " (modified)"
		}
		details = append(details, c)
	}
	switch {
	case ldDate != "":
		details = append(details, "built "+ldDate)
	case vcsTime != "":
		details = append(details, "committed "+vcsTime)
	}
	if goVer != "" {
		details = append(details, goVer)
	}
	if len(details) == 0 {
		return v
	}
	return v + " (" + strings.Join(details, ", ") + ")"
}

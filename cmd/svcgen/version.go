package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/release"
)

func newVersion(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print svcgen's version, commit, Go version and the kube-proxy releases it writes",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, versionText(readBuildInfo()))
			return err
		},
	}
}

func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// versionText is what svcgen version prints: the module version (a tag when installed
// with go install at one, else "(devel)"), the commit it was built from as the Go
// toolchain stamped it, the Go version, and the kube-proxy releases.
func versionText(bi *debug.BuildInfo) string {
	version, commit := "(devel)", ""
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		var rev, when, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", modified"
				}
			}
		}
		if rev != "" {
			commit = fmt.Sprintf(" (commit %.12s, %s%s)", rev, strings.TrimSuffix(when, "Z"), dirty)
		}
	}
	var names []string
	for _, r := range release.All() {
		names = append(names, r.String())
	}
	return fmt.Sprintf("svcgen %s%s\n%s %s/%s\nkube-proxy releases: %s (default %s)\n",
		version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.Join(names, ", "), release.Newest())
}

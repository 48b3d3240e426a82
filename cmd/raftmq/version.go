package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo describes the running binary. Everything comes from the build
// information the Go toolchain embeds (runtime/debug.ReadBuildInfo), so a
// plain `go build` or `go install` reports it without linker flags.
type versionInfo struct {
	// Module is the main module's path.
	Module string `json:"module"`
	// Version is the main module's version: a tag or pseudo-version when
	// built from a module download or (Go 1.24+) from a VCS checkout,
	// "(devel)" otherwise.
	Version string `json:"version"`
	// Commit is the VCS revision, empty when the build carried no VCS
	// information (-buildvcs=false, or no .git in the build context).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the revision's commit time (RFC 3339).
	CommitTime string `json:"commitTime,omitempty"`
	// Dirty is true when the working tree had uncommitted changes.
	Dirty bool `json:"dirty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the build.
	Platform string `json:"platform,omitempty"`
}

// readVersion extracts versionInfo from build info; ok is ReadBuildInfo's
// second result (false in binaries built without module support).
func readVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	if !ok || bi == nil {
		return versionInfo{Module: "github.com/raftmq/raftmq", Version: "unknown", GoVersion: "unknown"}
	}
	v := versionInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Dirty = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		v.Platform = goos + "/" + goarch
	}
	return v
}

// write prints v as aligned "key value" lines.
func (v versionInfo) write(w io.Writer) error {
	commit := "unknown (built without VCS information)"
	if v.Commit != "" {
		commit = v.Commit
		if v.Dirty {
			commit += " (dirty)"
		}
	}
	_, err := fmt.Fprintf(w, "raftmq   %s\nmodule   %s\ncommit   %s\n", v.Version, v.Module, commit)
	if err == nil && v.CommitTime != "" {
		_, err = fmt.Fprintf(w, "time     %s\n", v.CommitTime)
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "go       %s %s\n", v.GoVersion, v.Platform)
	}
	return err
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the module version, VCS commit and Go version this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion(debug.ReadBuildInfo())
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			return v.write(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

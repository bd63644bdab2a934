package main

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set by the release script with -ldflags "-X main.version=v1.2.3"
// (.ci/release); else the module version from the build info is used: the
// tag for `go install …@v1.2.3`, "(devel)" for a build from a clone, which
// then names the VCS revision it was built from.
var version = ""

func (m *Main) version(_ context.Context, args []string) error {
	fs := m.flags("version", "")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "mcpotc", buildVersion())
	return nil
}

// buildVersion is what `mcpotc version` prints after the program's name:
// the version, then the revision when the build info has one (a build
// from a clone: "devel 1a2b3c4d5e6f (dirty)"), then the Go release.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return versionString(version, nil, runtime.Version())
	}
	return versionString(version, bi, bi.GoVersion)
}

func versionString(ldflags string, bi *debug.BuildInfo, goVersion string) string {
	var rev, modified string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	v := ldflags
	if v == "" && bi != nil {
		v = bi.Main.Version
		// Built from a clone, Go stamps a pseudo-version made of the
		// revision (v0.0.0-20261124040920-b93739e57ee2+dirty): say devel
		// and the revision instead, unless a tag names the commit.
		if v == "(devel)" || rev != "" && (strings.HasSuffix(v, "+dirty") || pseudoVersion.MatchString(v)) {
			v = ""
		}
	}
	if v == "" {
		v = "devel"
	}
	out := v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " " + rev
		if modified == "true" {
			out += " (dirty)"
		}
	}
	if goVersion != "" {
		out += " " + goVersion
	}
	return out
}

// pseudoVersion matches the time-and-revision part of a Go module
// pseudo-version (https://go.dev/ref/mod#pseudo-versions).
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-[0-9a-f]{12}(\+|$)`)

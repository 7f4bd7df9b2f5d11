// Package version says which build of kafkamender runs: what --version prints and
// kafkamender_build_info's version label carries.
package version

import (
	"runtime/debug"
)

// Version is stamped at link time by release builds (the Dockerfile's VERSION):
//
//	go build -ldflags "-X github.com/kafkamender/kafkamender/internal/version.Version=1.4.0" ./cmd/worker
var Version string

// String is the version of this build: Version when stamped; else the module version the
// go command stamped (a tag, or a pseudo-version from the repository's commit); else the
// commit the binary was built from (vcs.revision, "+dirty" when the work tree had
// changes); else "(devel)".
func String() string { return from(Version, debug.ReadBuildInfo) }

func from(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	bi, ok := read()
	if !ok {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return "(devel) " + rev + dirty
	}
	return "(devel)"
}

package version

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	info := func(main string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: main}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name, stamped string
		read          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"stamped at link time", "1.4.0", info("v1.3.0"), "1.4.0"},
		{"a tagged module", "", info("v1.3.0"), "v1.3.0"},
		{"a pseudo-version", "", info("v0.0.0-20261203101500-0123456789ab"), "v0.0.0-20261203101500-0123456789ab"},
		{"a work tree with changes", "", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), "(devel) 0123456789ab+dirty"},
		{"a clean work tree", "", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), "(devel) 0123456789ab"},
		{"nothing known", "", info(""), "(devel)"},
		{"no build information", "", none, "(devel)"},
	} {
		if got := from(tc.stamped, tc.read); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	got := versionText(&debug.BuildInfo{
		Main: debug.Module{Version: "v0.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "629af9acbe70ffe3b40eaf1a1f3c10b4e4dc6a7b"},
			{Key: "vcs.time", Value: "2026-11-27T19:38:02Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	})
	for _, want := range []string{
		"svcgen v0.4.0 (commit 629af9acbe70, 2026-11-27T19:38:02)\n",
		"kube-proxy releases: 1.34, 1.35, 1.36, 1.37 (default 1.37)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("version:\n%s\nwant it to hold %q", got, want)
		}
	}
	if got := versionText(nil); !strings.HasPrefix(got, "svcgen (devel)\ngo") {
		t.Errorf("without build information: %q", got)
	}
}

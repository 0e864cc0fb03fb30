package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionOut is what `acemq version` prints, for a bug report.
type versionOut struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Wire     string `json:"wire_contract"`
}

// version prints the module version the binary was built from (a tag,
// or "(devel)" for a build from a checkout), the VCS revision when the
// build recorded one, the Go version and the wire contract's layout.
func (a *app) version(args []string) int {
	fs, asJSON, _ := a.flags("version", "", "Print the version of acemq this binary was built from.", false)
	if code, done := a.parse(fs, args); done {
		return code
	}
	out := versionOut{Module: "github.com/acemq/acemq", Version: "(unknown)", Go: runtime.Version(), Wire: "v1"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		out.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if *asJSON {
		a.printJSON(out)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "acemq %s", out.Version)
	if out.Revision != "" {
		fmt.Fprintf(a.stdout, " (%s", out.Revision)
		if out.Modified {
			fmt.Fprint(a.stdout, ", modified")
		}
		fmt.Fprint(a.stdout, ")")
	}
	fmt.Fprintf(a.stdout, ", %s, wire contract %s\n", out.Go, out.Wire)
	return exitOK
}

// Command sluice runs the sluice gateway and its tools.
//
//	sluice serve [--config] FILE run the gateway
//	sluice validate FILE         check a configuration; print every error
//	sluice demo                  a fragile upstream, the gateway and load, live
//	sluice version               print the version, VCS revision and Go version
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

const usage = `usage:
  sluice serve [--config] FILE run the gateway
  sluice validate FILE         check a configuration file; print every error
  sluice demo [flags]          run a fragile upstream, the gateway and load, and show what each policy does
  sluice version               print the version, VCS revision and Go version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "sluice", buildinfo.Read())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n%s", args[0], usage)
	return 2
}

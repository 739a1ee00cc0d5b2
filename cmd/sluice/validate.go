package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

const validateUsage = `usage: sluice validate FILE...

Checks each configuration file as sluice serve would load it: decoding,
defaults, validation, and building every route and policy (without
listening or connecting to Redis). Prints every problem as
file:line:col: field: message, or "FILE: ok". Exits 1 if a file has a
problem.
`

// validate checks configuration files and prints every problem as
// file:line:col: field: message. It exits 1 if any file has a problem, 2 on
// a usage error, 0 for -h.
func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on stdout for -h
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, validateUsage)
			return 0
		}
		fmt.Fprint(stderr, validateUsage)
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, validateUsage)
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		if err := check(path); err != nil {
			var errs config.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					fmt.Fprintln(stderr, e)
				}
			} else {
				fmt.Fprintf(stderr, "%s: %v\n", path, err)
			}
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", path)
	}
	return code
}

// check loads the file at path and builds what serve would build from it.
func check(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	return gateway.Check(cfg)
}

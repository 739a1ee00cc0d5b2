package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/config"
)

// validate checks configuration files and prints every problem as
// file:line:col: field: message. It exits 1 if any file has a problem.
func validate(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: sluice validate FILE...")
		return 2
	}
	code := 0
	for _, path := range args {
		if _, err := config.Load(path); err != nil {
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

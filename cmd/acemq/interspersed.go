package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// parseInterspersed is a.parse for a command that takes arguments among
// its flags (acemq triage --url U orders.dlq --json), returned in order.
func (a *app) parseInterspersed(fs *flag.FlagSet, args []string) (pos []string, code int, done bool) {
	for {
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		fs.SetOutput(a.stderr)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(a.stdout)
			fs.Usage()
			return nil, exitOK, true
		case err != nil:
			fmt.Fprintln(a.stderr, a.redact(err.Error()))
			fs.Usage()
			return nil, exitUsage, true
		case fs.NArg() == 0:
			return pos, 0, false
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

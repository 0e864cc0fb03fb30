package main

import (
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

// escapeErr is err's text escaped for a terminal or a page, with the
// errors it joins (errors.Join: a replay's failure and what giving back
// then failed) each on a line of its own: a line break inside one of
// them, which a producer's bytes may hold, is escaped; the ones between
// them are kept, rather than shown as a literal \n.
func escapeErr(err error) string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		lines := make([]string, 0, len(errs))
		for _, e := range errs {
			lines = append(lines, escapeErr(e))
		}
		return strings.Join(lines, "\n")
	}
	return escape.String(err.Error())
}

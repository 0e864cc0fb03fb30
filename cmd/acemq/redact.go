package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/acemq/acemq/internal/amqpconn"
)

// mightHoldPassword reports whether an argument could be a URL with a
// password, or its userinfo: it is shown redacted, wherever it is shown.
func mightHoldPassword(s string) bool {
	return strings.Contains(s, "://") || strings.Contains(s, "@")
}

// secrets are what of a command line might hold a password.
type secrets struct {
	// args are the arguments that might, in every form the flag package
	// quotes one: whole ("bad flag syntax"), without its dashes ("flag
	// provided but not defined: -amqp://..."), and the name and value of
	// --name=value; longest first.
	args []string
	// pieces are, of such an argument with control characters in it, the
	// pieces between them up to its last "@": output is redacted a line at
	// a time, and a tabwriter turns a "\t" into padding and a "\f" or "\v"
	// into a line break. (url.Parse refuses any control character, so the
	// argument is redacted up to its last "@" in any case.)
	pieces []string
}

func secretArgs(args []string) secrets {
	var s secrets
	add := func(list *[]string, v string) {
		if v != "" && !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for _, arg := range args {
		if !mightHoldPassword(arg) {
			continue
		}
		add(&s.args, arg)
		name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			for _, part := range []string{n, v} {
				if mightHoldPassword(part) {
					add(&s.args, part)
				}
			}
		}
		if mightHoldPassword(name) {
			add(&s.args, name)
		}
		if strings.IndexFunc(arg, unicode.IsControl) >= 0 {
			upTo := arg
			if at := strings.LastIndex(arg, "@"); at >= 0 {
				upTo = arg[:at]
			}
			for _, p := range strings.FieldsFunc(upTo, unicode.IsControl) {
				add(&s.pieces, p)
			}
		}
	}
	byLength := func(a, b string) int { return len(b) - len(a) }
	slices.SortStableFunc(s.args, byLength)
	slices.SortStableFunc(s.pieces, byLength)
	return s
}

// redact removes from text the password of url and every secret.
func (s secrets) redact(text, url string) string {
	text = amqpconn.RedactText(text, append(slices.Clip(s.args), url)...)
	for _, p := range s.pieces {
		if !strings.Contains(amqpconn.Redacted, p) {
			text = strings.ReplaceAll(text, p, amqpconn.Redacted)
		}
	}
	return text
}

// redactWriter writes to w what is written to it, redacted, a line at a
// time; Flush writes the rest.
type redactWriter struct {
	w      io.Writer
	redact func(string) string
	buf    []byte
}

func (r *redactWriter) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	i := bytes.LastIndexByte(r.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	lines := string(r.buf[:i+1])
	r.buf = append(r.buf[:0], r.buf[i+1:]...)
	if _, err := io.WriteString(r.w, r.redact(lines)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is left after the last line break.
func (r *redactWriter) Flush() error {
	if len(r.buf) == 0 {
		return nil
	}
	rest := string(r.buf)
	r.buf = r.buf[:0]
	_, err := io.WriteString(r.w, r.redact(rest))
	return err
}

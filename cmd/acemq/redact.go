package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/internal/redact"
)

// urlFlags are the flags whose value is a URL, and so a credential by its
// place: shown redacted wherever it is shown, even when it does not parse
// (a password pasted alone is hidden whole). internal/redact states the
// rule.
var urlFlags = []string{"url", "management"}

// urlVariables are the environment variables that hold a URL, read as
// urlFlags are; otherVariables are the command line's other variables,
// read as any other argument is.
var (
	urlVariables   = []string{EnvURL, EnvManagement}
	otherVariables = []string{EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSServerName}
)

// mightHoldPassword reports whether an argument given anywhere but in a
// URL's place holds a password as a URL does (a ":" before an "@"): it is
// then shown redacted, wherever it is shown. A queue name, a path, a
// number is shown as typed, URL-shaped or not: it is no credential.
func mightHoldPassword(s string) bool { return redact.HoldsPassword(s) }

// secrets are what of a command line might hold a password.
type secrets struct {
	// args are the values of urlFlags and urlVariables, and the arguments
	// that might hold a password, in every form the flag package quotes
	// one: whole ("bad flag syntax"), without its dashes ("flag provided
	// but not defined: -amqp://..."), and the name and value of
	// --name=value; longest first. Each is redacted as a URL
	// (redact.Text).
	args []string
	// pieces are hidden whole, as written: of such an argument with
	// control characters in it, the pieces between them up to its last
	// "@" (output is redacted a line at a time, and a tabwriter turns a
	// "\t" into padding and a "\f" or "\v" into a line break; url.Parse
	// refuses any control character, so the argument is redacted up to
	// its last "@" in any case).
	pieces []string
	// cut are the names the flag package quotes of --name=value when the
	// "=" cuts what stands before the host in two (--x://u:pw=@host is a
	// flag named "x://u:pw"): hidden whole, as written, before anything
	// else, as a line may show nothing else of the argument.
	cut []string
}

// secretArgs are the secrets of a command line.
func secretArgs(args []string) secrets {
	var s secrets
	for i, arg := range args {
		if arg == "--" {
			break
		}
		name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		n, v, hasValue := strings.Cut(name, "=")
		if strings.HasPrefix(arg, "-") && slices.Contains(urlFlags, n) {
			switch {
			case hasValue:
				s.add(v, true)
			case i+1 < len(args):
				s.add(args[i+1], true)
			}
		}
		if !mightHoldPassword(arg) {
			continue
		}
		// Every form of it the flag package quotes is a piece of a
		// secret, whether or not the piece looks like one: an "=" can cut
		// the password in two (--x://u:pw=@host is a flag named
		// "x://u:pw").
		s.add(arg, true)
		s.add(name, true)
		if hasValue {
			last := strings.LastIndex(name, "@")
			switch {
			case plainFlagName(n): // --queue=...: the flag's name
			case len(n) < last: // a piece of what stands before the host: hidden whole
				if !slices.Contains(s.cut, n) {
					s.cut = append(s.cut, n)
				}
			default:
				s.add(n, true)
			}
			if len(n) < last { // else v follows the host
				s.add(v, true)
			}
		}
	}
	s.sort()
	return s
}

// plainFlagName reports whether n could name a flag (--attempts=...):
// then it is the flag's name, not a piece of the secret after it.
func plainFlagName(n string) bool {
	return n != "" && strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == ""
}

// withVariables adds the values of urlVariables and otherVariables, read
// with getenv.
func (s secrets) withVariables(getenv func(string) string) secrets {
	s.args, s.pieces, s.cut = slices.Clone(s.args), slices.Clone(s.pieces), slices.Clone(s.cut)
	for _, name := range urlVariables {
		s.add(getenv(name), true)
	}
	for _, name := range otherVariables {
		s.add(getenv(name), false)
	}
	s.sort()
	return s
}

// add adds v; inURLPlace says it was given where a URL is expected.
func (s *secrets) add(v string, inURLPlace bool) {
	if v == "" || !inURLPlace && !mightHoldPassword(v) {
		return
	}
	if !slices.Contains(s.args, v) {
		s.args = append(s.args, v)
	}
	if strings.IndexFunc(v, unicode.IsControl) < 0 {
		return
	}
	upTo := v
	if at := strings.LastIndex(v, "@"); at >= 0 {
		upTo = v[:at]
	}
	for _, p := range strings.FieldsFunc(upTo, unicode.IsControl) {
		s.addPiece(p)
	}
}

// addPiece adds p to what is hidden whole, as it is written.
func (s *secrets) addPiece(p string) {
	if p != "" && !slices.Contains(s.pieces, p) {
		s.pieces = append(s.pieces, p)
	}
}

func (s *secrets) sort() {
	byLength := func(a, b string) int { return len(b) - len(a) }
	slices.SortStableFunc(s.args, byLength)
	slices.SortStableFunc(s.pieces, byLength)
	slices.SortStableFunc(s.cut, byLength)
}

// redact removes from text the password of url (the broker's, read as
// amqpconn reads one) and every secret.
func (s secrets) redact(text, url string) string {
	text = hideAll(text, s.cut)
	text = amqpconn.RedactText(text, url)
	text = redact.Text(text, s.args...)
	return hideAll(text, s.pieces)
}

// hideAll replaces each of secrets in text, as written, by the marker.
func hideAll(text string, secrets []string) string {
	for _, p := range secrets {
		if !strings.Contains(redact.Marker, p) {
			text = strings.ReplaceAll(text, p, redact.Marker)
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

// Package redact is the one redaction of credentials for everything acemq
// prints: the library's log lines and errors (internal/amqpconn) and the
// command line's output (cmd/acemq) go through it, so that one URL reads
// the same in every line.
//
// # The rule
//
// A URL's password is a secret; its user name is not. A URL is shown with
// its user and with Marker for its password, as most tools show one
// (amqp://ops:xxxxx@rabbit:5672/prod): an operator needs to know which
// user connected, and a user name is in every broker log anyway. A user
// name that holds the password (guest:guest) would show it, and is hidden
// with it, in every line alike: amqp://xxxxx:xxxxx@localhost/.
//
// A URL that does not parse as written cannot always be read as its
// author meant (a password with an unescaped "#", "/" or "?" reads as a
// port or a path), so it is cut by hand: its user information runs from
// "//" (or its start) to its last "@"; the user is what stands before the
// first ":" when that reads as a user name after a scheme's "//", and
// everything after is the password. When the user cannot be told from the
// password (no scheme before it, which a password pasted alone has not
// either; no ":"; a "user" holding what no user name can), the whole user
// information is hidden; and a value without "@" given where a URL was expected may be a
// password pasted alone, and is hidden whole.
//
// Only where a URL is expected (--url, --management, $ACEMQ_AMQP_URL,
// $ACEMQ_MANAGEMENT_URL) is a value a credential by its place. Any other
// text is one only when it holds a password the way a URL does, a ":"
// before an "@" (HoldsPassword): a queue name such as "amqp://x:y" is
// shown as typed.
package redact

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

// Marker stands for a password wherever one would be shown.
const Marker = "xxxxx"

// URL returns raw fit to print: its password replaced by Marker, its user
// kept. A URL without a password is returned as it is; one that does not
// parse as written is cut by hand (see the package doc), and one without
// "@" that does not parse is all Marker.
func URL(raw string) string { return inspect(raw).shown }

// Secrets are what of raw must never be printed: its password as written
// and as meant (percent-decoded), or, when the password cannot be told
// apart, all that holds it. Nil when raw has no password.
func Secrets(raw string) []string { return inspect(raw).secrets }

// HoldsPassword reports whether s, wherever it came from, holds a password
// the way a URL does: a ":" before its last "@" and after its scheme's
// "//", if any (user:password@host, with or without a scheme). Text that does not is no credential and is shown
// as it is.
func HoldsPassword(s string) bool {
	at := strings.LastIndex(s, "@")
	return at > 0 && strings.Contains(s[userStart(s[:at]):at], ":")
}

// Error returns err's text with every one of urls redacted: the network
// errors amqp091-go returns can quote the URL they were given.
func Error(err error, urls ...string) string {
	if err == nil {
		return ""
	}
	return Text(err.Error(), urls...)
}

// Text returns s with every one of urls replaced by URL of it, and then
// their secrets wherever else they stand, in every form a line can show
// them: as written, quoted by %q, encoded as JSON (as encoding/json writes
// it, and as the command line escapes it for a terminal), and escaped by
// internal/escape.
func Text(s string, urls ...string) string {
	var secrets []string
	for _, u := range urls {
		if u == "" || strings.Contains(Marker, u) {
			continue
		}
		in := inspect(u)
		if in.shown != u {
			s = replaceForms(s, u, in.shown)
		}
		secrets = append(secrets, in.secrets...)
	}
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, secret := range secrets {
		if secret != "" && !strings.Contains(Marker, secret) {
			s = replaceForms(s, secret, Marker)
		}
	}
	return s
}

// Hide returns s with secret replaced by Marker in every form Text names:
// for a value that must go whole wherever it stands, such as one given
// where a broker URL is expected that is none and has no "@" (a password
// pasted alone, amqpconn.Redact).
func Hide(s, secret string) string {
	if secret == "" || strings.Contains(Marker, secret) {
		return s
	}
	return replaceForms(s, secret, Marker)
}

// replaceForms replaces old with repl in s in each of the forms Text names.
func replaceForms(s, old, repl string) string {
	s = strings.ReplaceAll(s, old, repl)
	for _, form := range []func(string) string{quoted, plainJSON, jsonQuoted, escape.String, escapedQuoted} {
		if f := form(old); f != old {
			s = strings.ReplaceAll(s, f, form(repl))
		}
	}
	return s
}

func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// plainJSON is s inside a JSON string as encoding/json writes it (a log
// line's field), and jsonQuoted as the command line prints one: then
// escape.JSON's escapes too.
func plainJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	b = escape.JSON(b)
	return string(b[1 : len(b)-1])
}

func escapedQuoted(s string) string { return escape.String(quoted(s)) }

// inspected is what URL and Secrets make of one value.
type inspected struct {
	shown   string
	secrets []string
}

func inspect(raw string) inspected {
	if raw == "" {
		return inspected{}
	}
	var in inspected
	if u, err := url.Parse(raw); err != nil || !wellFormed(raw, u) {
		in = byHand(raw)
	} else {
		in = parsed(raw, u)
	}
	return in
}

// wellFormed reports whether url.Parse read raw's user information where
// its author put it: a scheme followed by "//", no fragment (a "#" in a
// password makes what follows it a fragment) and no "@" after the host (a
// "/" or "?" in a password ends the host early).
func wellFormed(raw string, u *url.URL) bool {
	if u.Scheme == "" || u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme):], "://") || strings.Contains(raw, "#") {
		return false
	}
	rest := raw[len(u.Scheme)+3:]
	end := strings.IndexAny(rest, "/?#")
	return end < 0 || !strings.Contains(rest[end:], "@")
}

// parsed redacts a well-formed URL: its user information, if any, ends at
// the last "@" before the path.
func parsed(raw string, u *url.URL) inspected {
	if u.User == nil {
		return inspected{shown: raw}
	}
	head := len(u.Scheme) + 3
	at := head + strings.LastIndex(raw[head:], "@")
	user, pw, hasPw := strings.Cut(raw[head:at], ":")
	if !hasPw {
		return inspected{shown: raw}
	}
	in := inspected{shown: raw[:head] + shownUser(user, pw) + ":" + Marker + raw[at:], secrets: []string{pw}}
	if meant, _ := u.User.Password(); meant != pw {
		in.secrets = append(in.secrets, meant)
	}
	return in
}

// byHand redacts what does not parse as written (see the package doc).
func byHand(raw string) inspected {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		in := inspected{shown: Marker, secrets: []string{raw}}
		if start := userStart(raw); start > 0 {
			if _, pw, ok := strings.Cut(raw[start:], ":"); ok {
				in.secrets = append(in.secrets, pw)
			}
		}
		return in
	}
	start := userStart(raw[:at])
	info := raw[start:at]
	user, pw, ok := strings.Cut(info, ":")
	if ok && start > 0 && plainUser(user) {
		return inspected{shown: raw[:start] + shownUser(user, pw) + ":" + Marker + raw[at:], secrets: withMeant(pw)}
	}
	in := inspected{shown: raw[:start] + Marker + raw[at:], secrets: []string{info}}
	if ok {
		in.secrets = append(in.secrets, withMeant(pw)...)
	}
	return in
}

// shownUser is user as shown: Marker when it holds the password, which
// Text would hide in it anyway (guest:guest reads xxxxx:xxxxx everywhere).
func shownUser(user, pw string) string {
	if pw != "" && strings.Contains(user, pw) {
		return Marker
	}
	return user
}

// withMeant is pw, and pw percent-decoded when that differs.
func withMeant(pw string) []string {
	if meant, err := url.PathUnescape(pw); err == nil && meant != pw {
		return []string{pw, meant}
	}
	return []string{pw}
}

// userStart is where the user information of s begins: after its first
// "scheme://", when nothing before that scheme holds a ":" (which would
// make it a user and a password), else 0.
func userStart(s string) int {
	i := strings.Index(s, "://")
	if i <= 0 || strings.Contains(s[:i], ":") {
		return 0
	}
	j := i
	for j > 0 && isSchemeChar(s[j-1]) {
		j--
	}
	for j < i && !isLetter(s[j]) { // a scheme begins with a letter
		j++
	}
	if j == i {
		return 0
	}
	return i + 3
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSchemeChar(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// plainUser reports whether s reads as a user name as a URL writes one:
// only what a URL's user information holds unescaped (letters, digits,
// -._~ !$&'()*+,;= and %XX escapes).
func plainUser(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isLetter(c), '0' <= c && c <= '9', strings.IndexByte("-._~!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

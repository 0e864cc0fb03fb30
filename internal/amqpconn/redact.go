package amqpconn

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/redact"
)

// Redacted stands for a password wherever one would be shown
// (redact.Marker).
const Redacted = redact.Marker

// ErrBadURL is matched, with errors.Is, by every error CheckURL returns.
var ErrBadURL = errors.New("acemq: the broker URL does not parse")

// urlError is a broker URL refused before any dial. Its text says what kind
// of mistake it is and quotes nothing of the URL: url.Parse and amqp091-go
// quote a piece of their input, and for a password with an unescaped "#"
// that piece ("invalid port \":50pct\"") is the start of the password. It
// unwraps to ErrBadURL and to their error, whose own text still quotes it.
type urlError struct {
	problem string
	err     error // url.Parse's or amqp091-go's; nil when the refusal is ours
}

func (e *urlError) Error() string {
	return ErrBadURL.Error() + " (it is not shown, as it may hold a password): " + e.problem
}

func (e *urlError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrBadURL}
	}
	return []error{ErrBadURL, e.err}
}

// CheckURL reports whether rawURL is a broker URL amqp091-go can dial as
// written. Besides what amqp091-go refuses, it refuses what amqp091-go
// would dial somewhere else than meant: an "@" after the host (a password
// with an unescaped "/" reads as host, port and vhost), a "#" (in a
// password it can make the user the host) and a scheme not followed by
// "//" (amqp:user:pass@host dials localhost as guest).
func CheckURL(rawURL string) error {
	if err := inspect(rawURL); err != nil {
		return err
	}
	return nil
}

// Redact returns rawURL with its password replaced, so that the URL can be
// logged or put in an error: redact.URL, the one redaction, whose rule
// (the user shown, the password hidden) its package doc states. Given
// where a broker URL is expected, a value CheckURL refuses that has no "@"
// may be a password pasted alone: it is hidden whole.
func Redact(rawURL string) string {
	if pastedAlone(rawURL) {
		return Redacted
	}
	return redact.URL(rawURL)
}

// RedactError returns err's text with every one of urls redacted: the
// network errors amqp091-go returns can quote the URL they were given.
func RedactError(err error, urls ...string) string {
	if err == nil {
		return ""
	}
	return RedactText(err.Error(), urls...)
}

// RedactText returns s with every one of urls redacted, and then their
// passwords wherever else they stand (redact.Text); a value that may be a
// password pasted alone (see Redact) is hidden whole.
func RedactText(s string, urls ...string) string {
	for _, u := range urls {
		if pastedAlone(u) {
			s = redact.Hide(s, u)
		}
	}
	return redact.Text(s, urls...)
}

// pastedAlone reports whether u, given as a broker URL, is none (CheckURL
// refuses it) and has no "@": nothing tells a password in it from the rest.
func pastedAlone(u string) bool {
	return u != "" && !strings.Contains(u, "@") && inspect(u) != nil
}

// inspect says why CheckURL refuses raw; nil when it may be dialled.
func inspect(raw string) *urlError {
	if raw == "" {
		return &urlError{problem: "it is empty"}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return &urlError{problem: parseProblem(err), err: err}
	}
	if problem := shapeProblem(raw, u); problem != "" {
		return &urlError{problem: problem}
	}
	if _, err := amqp.ParseURI(raw); err != nil {
		return &urlError{problem: amqpProblem(err), err: err}
	}
	return nil
}

// shapeProblem is what url.Parse accepts but a broker URL may not be.
func shapeProblem(raw string, u *url.URL) string {
	switch {
	case u.Scheme == "":
		return "it has no scheme: a broker URL begins amqp:// or amqps://"
	case u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme):], "://"):
		return "the scheme is not followed by //: a broker URL begins amqp:// or amqps://"
	}
	if strings.Contains(raw, "#") {
		return `it has a "#" (a broker URL has no fragment): a "#" in a password must be percent-encoded (%23)`
	}
	rest := raw[len(u.Scheme)+3:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 && strings.Contains(rest[end:], "@") {
		return `there is an "@" after the host: a "/", "?" or "#" in a password must be percent-encoded ` +
			`(%2F, %3F, %23), and an "@" in a vhost (%40)`
	}
	return ""
}

// parseProblem says what url.Parse found wrong, in words of our own: its
// error quotes the piece of the URL it choked on. Only the constant part
// of its text is looked at.
func parseProblem(err error) string {
	var escape url.EscapeError
	var host url.InvalidHostError
	var ue *url.Error
	msg := ""
	if errors.As(err, &ue) && ue.Err != nil {
		msg = ue.Err.Error()
	}
	switch {
	case errors.As(err, &escape):
		return `a "%" is not followed by two hex digits: a "%" in a password is written %25`
	case errors.As(err, &host):
		return "the host has a character a host name may not have"
	case strings.HasPrefix(msg, "invalid port "):
		return `what follows the first ":" after // is not a port: a "#", "?" or "/" in a password ` +
			`must be percent-encoded (%23, %3F, %2F)`
	case msg == "net/url: invalid userinfo":
		return "the user or password holds a character that must be percent-encoded (a space, a non-ASCII letter, ...)"
	case msg == "net/url: invalid control character in URL":
		return "it holds a control character"
	case msg == "missing ']' in host":
		return `an IPv6 host lacks its closing "]"`
	case msg == "missing protocol scheme", msg == "first path segment in URL cannot contain colon":
		return "it has no scheme: a broker URL begins amqp:// or amqps://"
	}
	return "it is not a URL"
}

// amqpProblem says what amqp091-go found wrong, in words of our own. Only
// the constant part of its text is looked at.
func amqpProblem(err error) string {
	var num *strconv.NumError
	msg := err.Error()
	switch {
	case msg == "URI must not contain whitespace":
		return "it holds a space"
	case msg == "AMQP scheme must be either 'amqp://' or 'amqps://'":
		return "the scheme is neither amqp:// nor amqps://"
	case strings.HasPrefix(msg, "heartbeat is not "), strings.HasPrefix(msg, "connection_timeout is not "),
		strings.HasPrefix(msg, "channel_max is not "):
		name, _, _ := strings.Cut(msg, " ")
		return "the query parameter " + name + " is not a whole number in range"
	case errors.As(err, &num):
		return "the port is not a number in range"
	}
	return "amqp091-go refuses it"
}

// redactedError shows a redacted text but still unwraps to the original, so
// that callers can branch on amqp091-go's errors (amqp.ErrCredentials, for
// instance) with errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr wraps err, an attempt to dial u, so that its text names u
// redacted. When u is a URL CheckURL refuses, err is amqp091-go's parse
// error, or the failure of a dial to where u did not mean; either way the
// text is CheckURL's, which quotes nothing.
func redactErr(err error, u string) error {
	if in := inspect(u); in != nil {
		return &urlError{problem: in.problem, err: err}
	}
	return &redactedError{msg: Redact(u) + ": " + RedactError(err, u), err: err}
}

package amqpconn

import (
	"net/url"
	"strings"
)

// redacted replaces a password wherever one would be shown.
const redacted = "xxxxx"

// Redact returns rawURL with its password replaced, so that the URL can be
// logged or put in an error. A string that does not parse as a URL is
// redacted by hand: everything between "://user:" and the last "@" before
// the host goes, so that a malformed URL still cannot leak a password.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" {
		return redactByHand(rawURL)
	}
	if u.User == nil {
		return rawURL
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	return u.String()
}

// redactByHand handles what url.Parse refused (an unescaped "%" or "#" in a
// password, for instance).
func redactByHand(s string) string {
	scheme := strings.Index(s, "://")
	if scheme < 0 {
		if strings.Contains(s, "@") {
			return redacted
		}
		return s
	}
	rest := s[scheme+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	userinfo := rest[:at]
	user, _, hasPass := strings.Cut(userinfo, ":")
	if !hasPass {
		return s
	}
	return s[:scheme+3] + user + ":" + redacted + rest[at:]
}

// RedactError returns err's text with every one of urls redacted: the
// network errors amqp091-go returns can quote the URL they were given.
func RedactError(err error, urls ...string) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	for _, u := range urls {
		if u == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, u, Redact(u))
		if parsed, perr := url.Parse(u); perr == nil && parsed.User != nil {
			if pw, ok := parsed.User.Password(); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, redacted)
			}
		}
	}
	return msg
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

// redactErr wraps err so that its text names u redacted.
func redactErr(err error, u string) error {
	return &redactedError{msg: Redact(u) + ": " + RedactError(err, u), err: err}
}

package amqpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// marker is the password, or a piece of it, that must never be shown.
const marker = "S3cr3tMarker"

// markedURLs builds, around marker, a broker URL whose password holds it
// (between pre and post), the same without the "@host", and the password
// alone. Only the first must have the marker in its userinfo; the other two
// are checked when CheckURL refuses them, as a URL without "@" that parses
// has no password to hide, and when the marker is not after their last "@"
// (an "@" in pre makes it the host).
func markedURLs(scheme, user, pre, post string) (withHost, noHost, bare string) {
	pw := pre + marker + post
	return scheme + "://" + user + ":" + pw + "@127.0.0.1:1/vh", scheme + "://" + user + ":" + pw, pw
}

// markedSeeds are the cases found by hand: a "#", "%", "@", "/", "?",
// spaces and non-ASCII in a password, amqps and a bad scheme.
var markedSeeds = []struct{ scheme, user, pre, post string }{
	{"amqp", "guest", "50pct#", ""},
	{"amqp", "guest", "", "#Hunter2"},
	{"amqp", "u", "%zz", ""},
	{"amqp", "u", "%", "%4"},
	{"amqp", "u", "a b ", ""},
	{"amqp", "u", "a@", "@b"},
	{"amqp", "u", "1/", ""},
	{"amqp", "u", "", "/x"},
	{"amqp", "u", "?", ""},
	{"amqp", "u", "pässwörd-", "-ü"},
	{"amqps", "u", "", ""},
	{"amqps", "u", "x#", "%zz"},
	{"http", "u", "", ""},
	{"amqp", "", ":", ""},
	{"", "u", "", ""},
	{"amqp:", "u", "", ""},
	{"amqp", "u", "\"\\\x01", "\n\t"},
}

// FuzzRedact: whatever surrounds the marked password, it is not in Redact
// of the URL, nor in CheckURL's error, nor in Open's error (a dial to
// 127.0.0.1:1, refused at once), nor in RedactError of an error quoting the
// URL in the ways errors do. The reconnect log lines are made of Redact and
// RedactError of the same.
func FuzzRedact(f *testing.F) {
	for _, s := range markedSeeds {
		f.Add(s.scheme, s.user, s.pre, s.post)
	}
	f.Fuzz(func(t *testing.T, scheme, user, pre, post string) {
		// The marker must be in the password alone: take it out of the rest.
		scheme, user = strings.ReplaceAll(scheme, marker, ""), strings.ReplaceAll(user, marker, "")
		withHost, noHost, bare := markedURLs(scheme, user, pre, post)
		checkHidden(t, withHost)
		if CheckURL(withHost) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := Open(ctx, Config{URLs: []string{withHost}, DialTimeout: time.Second})
			if err == nil {
				t.Fatalf("Open(%q) succeeded", withHost)
			}
			assertHidden(t, withHost, "Open", err.Error())
			assertHidden(t, withHost, "RedactError(Open)", RedactError(err, withHost))
		} else if _, err := amqp.ParseURI(withHost); err != nil {
			// amqp091-go refuses it too: Open fails before any dial.
			_, err := Open(context.Background(), Config{URLs: []string{withHost}})
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("Open(%q) = %v, want ErrBadURL", withHost, err)
			}
			assertHidden(t, withHost, "Open", err.Error())
		} else {
			// amqp091-go would dial it where it was not meant to (Dial in
			// transport/amqp refuses it first): the error of that dial.
			err := redactErr(fmt.Errorf("dial %s: %q refused", withHost, withHost), withHost)
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("redactErr(%q) = %v, want ErrBadURL", withHost, err)
			}
			assertHidden(t, withHost, "redactErr", err.Error())
		}
		for _, u := range []string{noHost, bare} {
			if CheckURL(u) != nil && !afterLastAt(u) {
				checkHidden(t, u)
			}
		}
	})
}

// checkHidden asserts that the marker in u is shown by none of Redact,
// CheckURL and RedactError.
func checkHidden(t *testing.T, u string) {
	t.Helper()
	assertHidden(t, u, "Redact", Redact(u))
	if err := CheckURL(u); err != nil {
		assertHidden(t, u, "CheckURL", err.Error())
		assertHidden(t, u, "RedactError(CheckURL)", RedactError(err, u))
	}
	quoting := fmt.Errorf("dial %s: refused (%q, %v)", u, u, []string{u})
	assertHidden(t, u, "RedactError", RedactError(quoting, u))
	assertHidden(t, u, "RedactText", RedactText(`{"url":"`+jsonString(u)+`"}`, u))
}

// afterLastAt reports whether the marker in u stands after its last "@".
func afterLastAt(u string) bool {
	at := strings.LastIndex(u, "@")
	return at >= 0 && strings.LastIndex(u, marker) > at
}

func assertHidden(tb testing.TB, u, where, shown string) {
	tb.Helper()
	if strings.Contains(shown, marker) {
		tb.Fatalf("%s of %q shows the password: %q", where, u, shown)
	}
}

// jsonString is s as it stands inside a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

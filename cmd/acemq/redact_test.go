package main

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/amqpconn"
)

// passwordArgs are the command lines that carry u where a password could
// be printed from: --url (dialled, at 127.0.0.1:1 in the tests, refused at
// once) and --url=, a URL's places, where anything is a credential; then,
// when u holds a password as a URL does (a ":" before an "@"), a
// positional argument, the command's place, a flag's refused value, a
// flag's name, a queue name printed on stdout as text and as JSON, and
// --from, which a usage error quotes.
func passwordArgs(u string) [][]string {
	urls := [][]string{
		{"peek", "--url", u, "--queue", "q.dlq"},
		{"peek", "--queue", "q.dlq", "--url=" + u},
	}
	if !mightHoldPassword(u) {
		return urls
	}
	return append(urls, [][]string{
		{"peek", "--queue", "q.dlq", u},
		{"topology", "--queue", "q", "--url", "amqp://x", u, "--apply"},
		{u, "peek"},
		{"schedule", "--queue", "q", "--attempts", u},
		{"schedule", "--queue", "q", "--" + u},
		{"schedule", "--queue", "q", "---" + u},
		{"topology", "--queue", u},
		{"topology", "--json", "--queue", u, "--attempts", "3", "--initial", "1m"},
		{"replay", "--queue", "q", "--from", u},
	}...)
}

// assertNotPrinted runs every command line of passwordArgs(u) and fails
// when secret is in what it printed.
func assertNotPrinted(t *testing.T, u, secret string) {
	t.Helper()
	for _, args := range passwordArgs(u) {
		_, out, errOut := cli(t, dialRabbitMQ, args...)
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("%q printed %q:\n%s%s", args, secret, out, errOut)
		}
	}
}

// TestPasswordsNeverPrintedOddURLs: the URLs found to leak, and their
// kin. A URL that does not parse is a wrong command line (status 2), said
// without quoting it; one that parses is dialled and its error redacted.
func TestPasswordsNeverPrintedOddURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, secret string
		parses            bool
	}{
		{"hash in password", "amqp://guest:50pct#Hunter2@127.0.0.1:1/", "50pct", false},
		{"hash, the rest", "amqp://guest:50pct#Hunter2@127.0.0.1:1/", "Hunter2", false},
		{"bad escape", "amqp://u:ab%zzHunter2@127.0.0.1:1/", "Hunter2", false},
		{"space", "amqp://u:Hunter 2@127.0.0.1:1/", "Hunter", false},
		{"at in password", "amqp://u:a@Hunter2@127.0.0.1:1/", "a@Hunter2", true},
		{"at in password, bad escape", "amqp://u:a@Hunter2%zz@127.0.0.1:1/", "Hunter2", false},
		{"slash in password", "amqp://u:12/Hunter2@127.0.0.1:1/", "Hunter2", false},
		{"unicode", "amqp://u:Hünter2@127.0.0.1:1/", "nter2", false},
		{"amqps", "amqps://u:Hunter2@127.0.0.1:1/", "Hunter2", true},
		{"escaped", "amqp://u:Hunter2%23x@127.0.0.1:1/", "Hunter2", true},
		{"bad scheme", "http://u:Hunter2@127.0.0.1:1/", "Hunter2", false},
		{"bare password", "Hunter2", "Hunter2", false},
		{"bare password with hash", "50pct#Hunter2", "Hunter2", false},
		{"bare password with at", "Hunter2@x", "Hunter2", false},
		// A tabwriter pads a "\t" and breaks the line at a "\f": the
		// queue name printed by topology is no longer the argument.
		{"tab", "amqp://u:Hun\tter2@127.0.0.1:1/", "Hun", false},
		{"form feed", "amqp://u:Hunter2\f@127.0.0.1:1/", "Hunter2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertNotPrinted(t, tt.url, tt.secret)
			code, _, errOut := cli(t, dialRabbitMQ, "peek", "--url", tt.url, "--queue", "q.dlq")
			if tt.parses {
				if code != 1 || !strings.Contains(errOut, ":xxxxx@127.0.0.1:1") {
					t.Errorf("status %d, want 1 naming the broker:\n%s", code, errOut)
				}
				return
			}
			if code != 2 || !strings.Contains(errOut, "--url: acemq: the broker URL does not parse (it is not shown, as it may hold a password): ") {
				t.Errorf("status %d, want 2 saying why:\n%s", code, errOut)
			}
		})
	}
}

// TestUnexpectedArgumentRedacted: a URL that slipped out of --url is named
// redacted, its user shown; an argument that holds no password (no ":"
// before an "@"), URL-shaped or not, is named as it is.
// (Before, "unexpected argument" printed it whole, password and all.)
func TestUnexpectedArgumentRedacted(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]string{
		"amqp://ops:hunter2@rabbit.internal/": `unexpected argument "amqp://ops:xxxxx@rabbit.internal/"`,
		"amqp://ops:50pct#hunter2@rabbit/":    `unexpected argument "amqp://ops:xxxxx@rabbit/"`,
		"ops:hunter2@rabbit":                  `unexpected argument "xxxxx@rabbit"`,
		"extra":                               `unexpected argument "extra"`,
		"amqp://orders:v2":                    `unexpected argument "amqp://orders:v2"`,
	} {
		code, _, errOut := cli(t, noBroker, "peek", "--queue", "q.dlq", arg)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%q: status %d, stderr %q; want 2 saying %s", arg, code, errOut, want)
		}
	}
}

// TestEnvURLNeverPrinted: a $ACEMQ_AMQP_URL that does not parse is named
// as the variable, not shown.
func TestEnvURLNeverPrinted(t *testing.T) {
	t.Setenv(EnvURL, "amqp://guest:50pct#Hunter2@127.0.0.1:1/")
	code, out, errOut := cli(t, dialRabbitMQ, "peek", "--queue", "q.dlq")
	if code != 2 || strings.Contains(out+errOut, "50pct") || strings.Contains(out+errOut, "Hunter2") ||
		!strings.Contains(errOut, "$ACEMQ_AMQP_URL: acemq: the broker URL does not parse") {
		t.Errorf("status %d:\n%s%s", code, out, errOut)
	}
}

// FuzzCLIRedact: a password holding the marker, in whatever URL around it,
// is in nothing the command line prints for any of passwordArgs.
func FuzzCLIRedact(f *testing.F) {
	for _, s := range []struct{ scheme, user, pre, post string }{
		{"amqp", "guest", "50pct#", ""}, {"amqp", "u", "%zz", ""}, {"amqp", "u", "a b ", ""},
		{"amqp", "u", "a@", "@b"}, {"amqp", "u", "1/", ""}, {"amqp", "u", "?", ""},
		{"amqp", "u", "pässwörd-", ""}, {"amqps", "u", "", ""}, {"http", "u", "", ""},
		{"", "u", "", ""}, {"amqp", "u", "=", "\n"}, {"amqp", "-", "\"", "\\"},
		{"amqp", "u", "\t", ""}, {"0", "0", "", "\f"},
	} {
		f.Add(s.scheme, s.user, s.pre, s.post)
	}
	const marker = "S3cr3tMarker"
	f.Fuzz(func(t *testing.T, scheme, user, pre, post string) {
		// The marker must be in the password alone: take it out of the rest.
		scheme, user = strings.ReplaceAll(scheme, marker, ""), strings.ReplaceAll(user, marker, "")
		pw := pre + marker + post
		assertNotPrinted(t, scheme+"://"+user+":"+pw+"@127.0.0.1:1/vh", marker)
		for _, u := range []string{scheme + "://" + user + ":" + pw, pw} {
			if at := strings.LastIndex(u, "@"); amqpconn.CheckURL(u) != nil && (at < 0 || strings.LastIndex(u, marker) < at) {
				assertNotPrinted(t, u, marker)
			}
		}
	})
}

package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestURL is the rule: the user shown, the password hidden; a URL that does
// not parse as written keeps its user where the user can be told from the
// password, and is hidden whole where nothing says where it ends.
func TestURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"password", "amqp://guest:s3cret@localhost:5672/vh", "amqp://guest:xxxxx@localhost:5672/vh"},
		{"amqps", "amqps://u:p@rabbit.example:5671/", "amqps://u:xxxxx@rabbit.example:5671/"},
		{"management API", "http://ops:s3cret@rabbit:15672", "http://ops:xxxxx@rabbit:15672"},
		{"management API, no user", "http://localhost:15672", "http://localhost:15672"},
		{"no password", "amqp://guest@localhost/", "amqp://guest@localhost/"},
		{"no userinfo", "amqp://localhost:5672/", "amqp://localhost:5672/"},
		{"escaped password", "amqp://u:p%40ss@host/", "amqp://u:xxxxx@host/"},
		{"at in password unescaped, parses", "amqp://u:a@b@host/", "amqp://u:xxxxx@host/"},
		{"empty", "", ""},
		{"user is the password", "amqp://guest:guest@localhost/", "amqp://xxxxx:xxxxx@localhost/"},
		// What does not parse as written: the user before the first ":".
		{"hash in password", "amqp://guest:50pct#Hunter2@host/", "amqp://guest:xxxxx@host/"},
		{"unparseable password", "amqp://u:50%off#x@host/", "amqp://u:xxxxx@host/"},
		{"bad escape", "amqp://u:%zz@host/", "amqp://u:xxxxx@host/"},
		{"at in password unescaped, bad escape", "amqp://u:a@b%zz@host/", "amqp://u:xxxxx@host/"},
		{"space in password", "amqp://u:a b@host/", "amqp://u:xxxxx@host/"},
		{"unicode password", "amqp://u:pässwörd@host/", "amqp://u:xxxxx@host/"},
		{"slash in password, reads as host and port", "amqp://u:12/S3cr3t@host/", "amqp://u:xxxxx@host/"},
		{"a flag's value", "url=amqp://guest:50pct#x@host/", "url=amqp://guest:xxxxx@host/"},
		{"no scheme with at", "u:p%zz@host", "xxxxx@host"},
		// Where the user cannot be told from the password: all of it.
		{"no slashes after the scheme", "amqp:u:S3cr3t@host", "xxxxx@host"},
		{"no colon", "amqp://S3 cr3t@host/", "amqp://xxxxx@host/"},
		{"user with a space", "amqp://a b:S3cr3t@host/", "amqp://xxxxx@host/"},
		{"scheme-like password", "u:pa://ss@h", "xxxxx@h"},
		{"a password pasted alone, with a colon and an at", "S3cr3t:x@y", "xxxxx@y"},
		// No "@": a password pasted alone.
		{"hash, no at", "amqp://guest:#Hunter2", "xxxxx"},
		{"bare password", "Hunter2", "xxxxx"},
		{"bare password with hash", "50pct#Hunter2", "xxxxx"},
		{"no at, does not parse", "amqp://u:S3cr3t", "xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestText: a URL's password is gone from the text wherever it stands and
// however it is written (as is, %q, JSON, escaped for a terminal), and the
// URL itself reads redacted.
func TestText(t *testing.T) {
	t.Parallel()
	u := "amqp://guest:hun\"ter\x7f2@localhost:1/vh"
	in := fmt.Sprintf("dial %s: %q; {\"url\":%q} \\x7f", u, u, u)
	got := Text(in+` "hun\"ter\u007f2" hun\"ter\x7f2`, u)
	for _, leak := range []string{"hun", "ter"} {
		if strings.Contains(got, leak) {
			t.Errorf("Text leaks %q: %q", leak, got)
		}
	}
	if !strings.Contains(got, "amqp://guest:xxxxx@localhost:1/vh") {
		t.Errorf("the redacted URL is missing: %q", got)
	}
	if Error(nil, u) != "" || Error(errors.New("x "+u), u) != "x amqp://guest:xxxxx@localhost:1/vh" {
		t.Error("Error")
	}
}

func TestHoldsPassword(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"amqp://u:p@h": true, "u:p@h": true, "x:@": true,
		"orders.dlq": false, "amqp://x:y": false, "alerts@team": false, "amqp://u@h": false, "@:": false,
	} {
		if got := HoldsPassword(s); got != want {
			t.Errorf("HoldsPassword(%q) = %v", s, got)
		}
	}
}

// FuzzURL: a password holding the marker, in whatever URL around it, is in
// neither URL nor Text of it; the user, without the marker, is shown
// wherever it can be told from the password.
func FuzzURL(f *testing.F) {
	for _, s := range [][4]string{
		{"amqp", "guest", "50pct#", ""}, {"amqp", "u", "%zz", ""}, {"amqp", "u", "a@", "@b"},
		{"amqp", "u", "1/", ""}, {"http", "u", "", ""}, {"", "u", "", ""}, {"amqp", "a b", "", ""},
		{"\x7f", "0", "\"", "0"}, {"amqp", "u", "\"\\\x01", "\n\t"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	const marker = "S3cr3tMarker"
	f.Fuzz(func(t *testing.T, scheme, user, pre, post string) {
		scheme, user = strings.ReplaceAll(scheme, marker, ""), strings.ReplaceAll(user, marker, "")
		pw := pre + marker + post
		u := scheme + "://" + user + ":" + pw + "@127.0.0.1:1/vh"
		for _, shown := range []string{URL(u), Text(fmt.Sprintf("%s %q", u, u), u), Text(jsonQuoted(u), u), Text(escapedQuoted(u), u)} {
			if strings.Contains(shown, marker) {
				t.Fatalf("%q shown as %q", u, shown)
			}
		}
		for _, alone := range []string{pw, scheme + "://" + user + ":" + pw} {
			if pu, err := url.Parse(alone); err == nil && wellFormed(alone, pu) {
				continue // a URL without a password, as written: host, port, path
			}
			if at := strings.LastIndex(alone, "@"); at < 0 || strings.LastIndex(alone, marker) < at {
				if shown := URL(alone); strings.Contains(shown, marker) {
					t.Fatalf("%q shown as %q", alone, shown)
				}
			}
		}
	})
}

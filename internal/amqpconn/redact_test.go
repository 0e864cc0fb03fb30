package amqpconn

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRedactIsTheOneRedaction: amqpconn's Redact is internal/redact's
// (whose tests hold the rule), for a URL that parses and one that does not.
func TestRedactIsTheOneRedaction(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"amqp://guest:s3cret@localhost:5672/vh": "amqp://guest:xxxxx@localhost:5672/vh",
		"amqp://guest:50pct#Hunter2@host/":      "amqp://guest:xxxxx@host/",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckURL: a URL that does not parse is refused with words of ours
// that quote nothing of it, and still unwraps to the parser's error.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, secret, says string
		parseErr               bool // unwraps to a *url.Error
	}{
		{"hash in password", "amqp://guest:50pct#Hunter2@host/", "50pct", "not a port", true},
		{"bad escape", "amqp://u:ab%zzcd@host/", "%zz", `"%" is not followed by two hex digits`, true},
		{"space in password", "amqp://u:Hunter 2@host/", "Hunter", "percent-encoded", true},
		{"space in vhost", "amqp://u:Hunter2@host/a b", "Hunter2", "space", false},
		{"at in password, bad escape", "amqp://u:a@Hunter2%zz@host/", "Hunter2", "two hex digits", true},
		{"unicode password", "amqp://u:Hünter2@host/", "nter2", "percent-encoded", true},
		{"amqps, hash", "amqps://u:Hunter2#x@host/", "Hunter2", "not a port", true},
		{"bad scheme", "http://u:Hunter2@host/", "Hunter2", "neither amqp:// nor amqps://", false},
		{"bare password", "Hunter2", "Hunter2", "no scheme", false},
		{"bare password with hash", "50pct#Hunter2", "50pct", "no scheme", false},
		{"slash in password", "amqp://u:12/Hunter2@host/", "Hunter2", `"@" after the host`, false},
		{"no slashes", "amqp:u:Hunter2@host", "Hunter2", "not followed by //", false},
		{"hash, no at", "amqp://guest:#Hunter2", "Hunter2", `has a "#"`, false},
		{"port out of range", "amqp://u:Hunter2@host:99999999999/", "99999999999", "port", false},
		{"bad heartbeat", "amqp://u:p@host/?heartbeat=Hunter2", "Hunter2", "heartbeat", false},
		{"control character", "amqp://u:Hunter\x012@host/", "Hunter", "control character", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckURL(tt.in)
			if err == nil {
				t.Fatalf("CheckURL(%q) = nil", tt.in)
			}
			if msg := err.Error(); strings.Contains(msg, tt.secret) || !strings.Contains(msg, tt.says) ||
				!strings.HasPrefix(msg, "acemq: the broker URL does not parse (it is not shown, as it may hold a password): ") {
				t.Errorf("CheckURL(%q) = %q; want it to say %q and not %q", tt.in, msg, tt.says, tt.secret)
			}
			if !errors.Is(err, ErrBadURL) {
				t.Error("not errors.Is ErrBadURL")
			}
			var ue *url.Error
			if errors.As(err, &ue) != tt.parseErr {
				t.Errorf("errors.As(*url.Error) = %v, want %v", !tt.parseErr, tt.parseErr)
			}
			if shown := RedactError(err, tt.in); strings.Contains(shown, tt.secret) {
				t.Errorf("RedactError shows %q", shown)
			}
		})
	}
	for _, ok := range []string{"amqp://guest:guest@localhost:5672/", "amqps://u:p%23x@host/vh", "amqp://", "amqp://host", "AMQP://u:p@host/"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
}

// TestOpenBadURL: Open's error for a URL that does not parse is CheckURL's,
// quoting nothing, alone or among others.
func TestOpenBadURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, urls := range [][]string{
		{"amqp://guest:50pct#Hunter2@127.0.0.1:1/"},
		{"amqp://guest:guest@127.0.0.1:1/", "amqp://guest:50pct#Hunter2@127.0.0.1:1/"},
	} {
		_, err := Open(ctx, Config{URLs: urls, Name: "t", DialTimeout: time.Second})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", urls)
		}
		if msg := err.Error(); strings.Contains(msg, "50pct") || strings.Contains(msg, "Hunter2") || !strings.Contains(msg, "does not parse") {
			t.Errorf("Open(%q) = %q", urls, msg)
		}
		var ue *url.Error
		if !errors.Is(err, ErrBadURL) || !errors.As(err, &ue) {
			t.Errorf("Open(%q): the causes are lost: %v", urls, err)
		}
	}
}

func TestRedactError(t *testing.T) {
	t.Parallel()
	u := "amqp://guest:hunter2@localhost:1/vh"
	err := errors.New("dial " + u + ": password hunter2 rejected")
	got := RedactError(err, u)
	if strings.Contains(got, "hunter2") {
		t.Fatalf("password leaked: %q", got)
	}
	if !strings.Contains(got, "amqp://guest:xxxxx@localhost:1/vh") {
		t.Fatalf("redacted URL missing: %q", got)
	}
	if RedactError(nil, u) != "" {
		t.Fatal("nil error should redact to empty")
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for n := range 20 {
		d := b.Delay(n)
		ceil := min(b.Min<<min(n, 10), b.Max)
		if d < ceil/2 || d > ceil {
			t.Fatalf("Delay(%d) = %s, want within [%s, %s]", n, d, ceil/2, ceil)
		}
	}
	if d := (Backoff{}).Delay(3); d <= 0 {
		t.Fatalf("zero Backoff must still wait, got %s", d)
	}
}

func TestRedactErrUnwraps(t *testing.T) {
	t.Parallel()
	inner := errors.New("auth failed for amqp://u:pw123@h/")
	err := redactErr(inner, "amqp://u:pw123@h/")
	if strings.Contains(err.Error(), "pw123") {
		t.Fatalf("password leaked: %q", err)
	}
	if !errors.Is(err, inner) {
		t.Fatal("the original error is lost")
	}
}

// TestOpenChecksEveryURL: Open itself refuses a URL amqp091-go would dial
// somewhere else (an @ after the host), before any dial, in words that
// quote none of it.
func TestOpenChecksEveryURL(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Config{URLs: []string{"amqp://u:12/S3cr3tMarker@127.0.0.1:1/"}})
	if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "S3cr3tMarker") {
		t.Errorf("Open = %v", err)
	}
}

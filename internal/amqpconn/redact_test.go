package amqpconn

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"password", "amqp://guest:s3cret@localhost:5672/vh", "amqp://guest:xxxxx@localhost:5672/vh"},
		{"amqps", "amqps://u:p@rabbit.example:5671/", "amqps://u:xxxxx@rabbit.example:5671/"},
		{"no password", "amqp://guest@localhost/", "amqp://guest@localhost/"},
		{"no userinfo", "amqp://localhost:5672/", "amqp://localhost:5672/"},
		{"escaped password", "amqp://u:p%40ss@host/", "amqp://u:xxxxx@host/"},
		{"unparseable password", "amqp://u:50%off#x@host/", "amqp://u:xxxxx@host/"},
		{"at in password unescaped", "amqp://u:a@b%zz@host/", "amqp://u:xxxxx@host/"},
		{"no scheme with at", "u:p%zz@host", "xxxxx"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
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

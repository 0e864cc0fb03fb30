package idempotency_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/idempotency"
)

func TestKey(t *testing.T) {
	t.Parallel()
	hashed := func(id string) string {
		sum := sha256.Sum256([]byte(id))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	tests := []struct {
		name, id, want string
	}{
		{"a UUID is itself", "7f9c2ba4-e88f-4e2b-9f4a-1c5d8b0e6a31", "7f9c2ba4-e88f-4e2b-9f4a-1c5d8b0e6a31"},
		{"printable ASCII is itself", ` !"#$%&'()*+,-./09:;<=>?@AZ[\]^_` + "`az{|}~", ` !"#$%&'()*+,-./09:;<=>?@AZ[\]^_` + "`az{|}~"},
		{"SQL is data, kept as it is", `x'); DROP TABLE t; --`, `x'); DROP TABLE t; --`},
		{"255 bytes are kept", strings.Repeat("k", 255), strings.Repeat("k", 255)},
		{"256 bytes are hashed", strings.Repeat("k", 256), hashed(strings.Repeat("k", 256))},
		{"NUL is hashed", "a\x00b", hashed("a\x00b")},
		{"a newline is hashed", "a\nb", hashed("a\nb")},
		{"DEL is hashed", "a\x7fb", hashed("a\x7fb")},
		{"invalid UTF-8 is hashed", "\xff", hashed("\xff")},
		{"non-ASCII is hashed", "été", hashed("été")},
		{"the prefix is hashed, so no plain id looks like a key", "sha256:00", hashed("sha256:00")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := idempotency.Key(tt.id)
			if err != nil || got != tt.want {
				t.Fatalf("Key = %q, %v; want %q", got, err, tt.want)
			}
			if len(got) > 255 {
				t.Errorf("a key of %d bytes", len(got))
			}
		})
	}
	if _, err := idempotency.Key(""); !errors.Is(err, idempotency.ErrEmptyID) {
		t.Errorf("Key(\"\") = %v, want ErrEmptyID", err)
	}
}

func BenchmarkKey(b *testing.B) {
	for _, id := range []string{"7f9c2ba4-e88f-4e2b-9f4a-1c5d8b0e6a31", strings.Repeat("x", 4096)} {
		b.Run(map[bool]string{true: "uuid", false: "4KiB"}[len(id) == 36], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = idempotency.Key(id)
			}
		})
	}
}

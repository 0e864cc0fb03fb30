package idempotency

import (
	"strings"
	"testing"
)

// plainByByte is plain written the obvious way, to check the fast one.
func plainByByte(id string) bool {
	if len(id) > maxPlainKey || strings.HasPrefix(id, hashedPrefix) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// Every byte value at every position of a word and of the tail.
func TestPlainEveryByte(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 19; n++ {
		for pos := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				id := string(b)
				if got, want := plain(id), plainByByte(id); got != want {
					t.Fatalf("plain(%q) = %v, want %v", id, got, want)
				}
			}
		}
	}
	// Two odd bytes in one word: a borrow from one must not hide another.
	for c := range 256 {
		for d := range 256 {
			id := string([]byte{'a', byte(c), byte(d), 'a', 'a', 'a', 'a', 'a'})
			if got, want := plain(id), plainByByte(id); got != want {
				t.Fatalf("plain(%q) = %v, want %v", id, got, want)
			}
		}
	}
}

func FuzzPlain(f *testing.F) {
	for _, seed := range []string{"", "a", "order-42", "a\x00b", "\xff\xfe", "sha256:x", strings.Repeat("x", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := plain(id), plainByByte(id); got != want {
			t.Fatalf("plain(%q) = %v, want %v", id, got, want)
		}
	})
}

package escape_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/escape"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"plain", "exhausted 5 attempts: the warehouse is not answering", "exhausted 5 attempts: the warehouse is not answering"},
		{"empty", "", ""},
		{"unicode kept", "Zürich → 東京 ✓", "Zürich → 東京 ✓"},
		{"clear screen", "boom\x1b[2J\x1b[H", `boom\x1b[2J\x1b[H`},
		{"osc 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\x07`},
		{"osc with ST", "\x1b]0;title\x1b\\", `\x1b]0;title\x1b\\`},
		{"forged row", "m-1\nm-2  5  3h  the handler rejected it: fake", `m-1\nm-2  5  3h  the handler rejected it: fake`},
		{"crlf and tab", "a\r\nb\tc", `a\r\nb\tc`},
		{"nul and bell", "a\x00b\x07", `a\x00b\x07`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 csi as utf-8", "a\u009b2Jb", `a\u009b2Jb`},
		{"c1 nel", "a\u0085b", `a\u0085b`},
		{"c1 csi raw byte", "a\x9b2Jb", `a\x9b2Jb`},
		{"invalid utf-8", "\xff\xfe ok \xc3", `\xff\xfe ok \xc3`},
		{"right-to-left override", "invoice\u202Etxt.exe", `invoice\u202etxt.exe`},
		{"every bidi embedding and override", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero width", "pay\u200bpal\u200c\u200d\u2060\ufeff", `pay\u200bpal\u200c\u200d\u2060\ufeff`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"tag characters", "a\U000E0041b", `a\U000e0041b`},
		{"backslash", `C:\orders\x1b`, `C:\\orders\\x1b`},
		{"replacement char kept", "a\ufffdb", "a\ufffdb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := escape.String(c.in); got != c.want {
				t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := escape.Bytes([]byte(c.in)); got != c.want {
				t.Errorf("Bytes(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789abc", 10, "0123456789…"},
		{"abcdefgh\x1b[2J", 10, "abcdefgh…"}, // not "abcdefgh\x" cut in the escape
		{"abcdef東京", 8, "abcdef…"},
		{"ab\ncd", 10, `ab\ncd`},
	} {
		if got := escape.Cut(c.in, c.max); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	in := map[string]string{"reason": "a\x1b[2J\u202e\u0085\x7f\u200b\u2028b\U000E0041", "id": "m-1\nm-2", "body": "\xff"}
	enc, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := escape.JSON(enc)
	if !escape.IsSafe(strings.ReplaceAll(string(out), "\n", "")) {
		t.Errorf("unsafe JSON: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if back["reason"] != in["reason"] || back["id"] != in["id"] || back["body"] != "\ufffd" {
		t.Errorf("decoded %q, want %q", back, in)
	}
	plain := []byte(`{"a": "b"}`)
	if got := escape.JSON(plain); string(got) != string(plain) {
		t.Errorf("JSON(%s) = %s", plain, got)
	}
}

// FuzzString: whatever a producer writes, the output is valid UTF-8 with
// no control byte and no bidi, format or separator rune, and text that was
// safe (and held no backslash) is printed as it was.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\x1b]52;c;aGk=\x07", "a\nb", "\u202e", "\u2066x\u2069", "\xff\xc3", "\u0085", "\\x1b", "\u2028", "\ufeff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := escape.String(s)
		checkSafe(t, out)
		if escape.IsSafe(s) && !strings.Contains(s, `\`) && out != s {
			t.Errorf("safe %q printed as %q", s, out)
		}
		if cut := escape.Cut(s, 16); len(cut) > 16+len("…") {
			t.Errorf("Cut(%q, 16) is %d bytes", s, len(cut))
		} else {
			checkSafe(t, cut)
		}
		enc, err := json.Marshal(map[string]string{"v": s})
		if err != nil {
			t.Fatal(err)
		}
		j := escape.JSON(enc)
		checkSafe(t, string(j))
		var back map[string]string
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatalf("%v: %s", err, j)
		}
		if utf8.ValidString(s) && back["v"] != s {
			t.Errorf("JSON round trip %q -> %q", s, back["v"])
		}
	})
}

func checkSafe(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("invalid UTF-8 in %q", out)
	}
	for _, r := range out {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
			r == 0x2028 || r == 0x2029 || r == 0x200b || r == 0x200e || r == 0x200f || r == 0xfeff || escape.Unsafe(r) {
			t.Fatalf("rune %U in %q", r, out)
		}
	}
}

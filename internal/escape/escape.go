// Package escape makes producer-controlled text safe to print on an
// operator's terminal. Every field a command prints from a message (its id,
// reason, headers, body) was written by whoever published it: an
// x-acemq-error holding ESC[2J clears the screen, an OSC 52 sequence writes
// the clipboard, a newline in an id forges a row of a table, and a
// right-to-left override makes "exe.txt" read as "txt.exe".
//
// String and Bytes replace every such rune by a visible escape that reads
// like Go's (\x1b, \n, \u202e) and a backslash by \\, so that what is
// printed is one line, shows the bytes that were there, and cannot be
// mistaken for an escape the message did not hold. JSON does the same for
// JSON text already encoded, with JSON's own \u escapes, so that a decoder
// gets the exact string back.
package escape

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every unsafe rune escaped: control characters (C0,
// DEL, C1: \n, \r, \t, \x1b, \u0085), which include the start of every
// ANSI and OSC escape sequence; format characters (bidi overrides and
// isolates U+202A-U+202E and U+2066-U+2069, marks, zero-width characters,
// the byte order mark: \u202e, \u200b); the line and paragraph separators
// U+2028 and U+2029; bytes that are not UTF-8 (\xff); and the backslash
// (\\). Everything else is printed as it is.
func String(s string) string {
	if IsSafe(s) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			writeByte(&b, s[i])
			i++
			continue
		}
		i += size
		writeRune(&b, r)
	}
	return b.String()
}

// Bytes is String for a body.
func Bytes(p []byte) string { return String(string(p)) }

// Cut is String(s) cut to at most max bytes of output, on a rune boundary
// and never inside an escape, with "…" after it when it was cut.
func Cut(s string, max int) string {
	e := String(s)
	if len(e) <= max {
		return e
	}
	// Cut on the input, so that no escape is split.
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		if r == utf8.RuneError && size <= 1 {
			piece = String(s[i : i+1])
		} else {
			piece = String(s[i : i+size])
		}
		if b.Len()+len(piece) > max {
			break
		}
		b.WriteString(piece)
		i += size
	}
	return b.String() + "…"
}

// IsSafe reports whether s is valid UTF-8 without a rune String escapes
// (the backslash aside): it prints as the text it is.
func IsSafe(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || Unsafe(r) {
			return false
		}
		i += size
	}
	return true
}

// Unsafe reports whether r is a rune String escapes (the backslash aside):
// a control character, a format character (bidi controls, zero-width
// characters), a line or paragraph separator, or a surrogate or
// non-character.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	case r <= 0x9f: // C1
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r >= 0xd800 && r <= 0xdfff, r == 0xfffe, r == 0xffff:
		return true
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

const hexDigits = "0123456789abcdef"

func writeByte(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

func writeRune(b *strings.Builder, r rune) {
	switch r {
	case '\\':
		b.WriteString(`\\`)
		return
	case '\n':
		b.WriteString(`\n`)
		return
	case '\r':
		b.WriteString(`\r`)
		return
	case '\t':
		b.WriteString(`\t`)
		return
	}
	if !Unsafe(r) {
		b.WriteRune(r)
		return
	}
	if r < 0x80 {
		writeByte(b, byte(r))
		return
	}
	s := strconv.FormatInt(int64(r), 16)
	if r > 0xffff {
		b.WriteString(`\U`)
		b.WriteString(strings.Repeat("0", 8-len(s)))
	} else {
		b.WriteString(`\u`)
		b.WriteString(strings.Repeat("0", 4-len(s)))
	}
	b.WriteString(s)
}

// JSON rewrites JSON text, as encoding/json writes it, so that no string in
// it holds a rune String would escape: encoding/json already writes C0
// controls, U+2028 and U+2029 as \u escapes and invalid UTF-8 as U+FFFD,
// but leaves DEL, C1 and the bidi and zero-width characters as they are.
// They become \u escapes, which decode to the same string: the JSON means
// exactly what it meant, and a terminal shows it as text.
func JSON(p []byte) []byte {
	if IsSafe(strings.ReplaceAll(string(p), "\n", "")) {
		return p
	}
	out := make([]byte, 0, len(p)+32)
	for i := 0; i < len(p); {
		c := p[i]
		if c == '\n' {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = append(out, `\ufffd`...)
		case Unsafe(r):
			for _, u := range utf16Units(r) {
				out = append(out, `\u`...)
				s := strconv.FormatInt(int64(u), 16)
				out = append(out, strings.Repeat("0", 4-len(s))...)
				out = append(out, s...)
			}
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return out
}

func utf16Units(r rune) []rune {
	if r <= 0xffff {
		return []rune{r}
	}
	r -= 0x10000
	return []rune{0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff}
}

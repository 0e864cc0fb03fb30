package codec

import "encoding/binary"

// validJSON is json.Valid without its allocations and at about five times
// the speed: the decode middleware runs it on every message, where json.Valid
// was the largest in-process cost. The fuzz test holds it to json.Valid.

const maxDepth = 10000

// validJSON reports whether data is one JSON value (RFC 8259) with optional
// surrounding whitespace; like encoding/json it does not check UTF-8.
func validJSON(data []byte) bool {
	i, ok := value(data, ws(data, 0), 0)
	return ok && ws(data, i) == len(data)
}

func ws(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

func value(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		return str(d, i)
	case c == '{':
		return container(d, i, depth, '}', true)
	case c == '[':
		return container(d, i, depth, ']', false)
	case c == '-' || c >= '0' && c <= '9':
		return number(d, i)
	case c == 't':
		return lit(d, i, "true")
	case c == 'f':
		return lit(d, i, "false")
	case c == 'n':
		return lit(d, i, "null")
	}
	return i, false
}

func container(d []byte, i, depth int, end byte, object bool) (int, bool) {
	if depth++; depth > maxDepth {
		return i, false
	}
	i = ws(d, i+1)
	if i < len(d) && d[i] == end {
		return i + 1, true
	}
	for {
		var ok bool
		if object {
			if i >= len(d) || d[i] != '"' {
				return i, false
			}
			if i, ok = str(d, i); !ok {
				return i, false
			}
			if i = ws(d, i); i >= len(d) || d[i] != ':' {
				return i, false
			}
			i = ws(d, i+1)
		}
		if i, ok = value(d, i, depth); !ok {
			return i, false
		}
		if i = ws(d, i); i >= len(d) {
			return i, false
		}
		switch d[i] {
		case ',':
			i = ws(d, i+1)
		case end:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// Eight bytes at a time: a word is plain when none of its bytes is below
// 0x20, a quote or a backslash. The tests for a byte below n and for a zero
// byte are the usual ones on words ("Bit Twiddling Hacks", hasless and
// haszero); they may report a byte that is in fact plain when a borrow
// crosses from a lower byte, never miss one that is not, and a word
// reported is then read a byte at a time.
const (
	ones   = 0x0101010101010101
	highs  = 0x8080808080808080
	quotes = '"' * ones
	slashs = '\\' * ones
)

func plainWord(w uint64) bool {
	q, s := w^quotes, w^slashs // a zero byte where w has a quote, a backslash
	below := (w - 0x20*ones) &^ w
	quote := (q - ones) &^ q
	slash := (s - ones) &^ s
	return (below|quote|slash)&highs == 0
}

// plain marks the bytes a string holds as they are.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func str(d []byte, i int) (int, bool) {
	for i++; i < len(d); {
		for i+8 <= len(d) && plainWord(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(d) {
				return i, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(d) {
					return i, false
				}
				for _, h := range d[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
	return i, false
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

func number(d []byte, i int) (int, bool) {
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return i, false
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func lit(d []byte, i int, word string) (int, bool) {
	if len(d)-i < len(word) || string(d[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

package codec

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var samples = []string{
	`{}`, `[]`, `{"a":1}`, `[1,2,{"b":[true,false,null]}]`, `"\u00e9"`, `"\uZZZZ"`, `-0.5e+3`, `0`, `-0`, `01`,
	`{"a":}`, `[1,]`, "\"\xff\"", ` 1 `, `1.`, `-`, `"\x01"`, `{"a" 1}`, `tru`, `nulll`, `""`, `"\"`, `1e`, `1E-2`,
	`{"a":1,}`, `{,}`, `[`, `{"a":1 "b":2}`, " \t\r\n[ ] ", `"\/\b\f\n\r\t\\"`, `"\q"`, `+1`, `.5`, ``, ` `,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range append(samples, string(body(256))) {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.40q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Add(body(256))
	f.Fuzz(func(t *testing.T, d []byte) {
		if got, want := validJSON(d), json.Valid(d); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", d, got, want)
		}
	})
}

// body is the bench's 256-byte order.
func body(size int) []byte {
	const head, tail = `{"id":12345,"customer":"c-778","pad":"`, `"}`
	b := []byte(head)
	for i := range size - len(head) - len(tail) {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, tail...)
}

func BenchmarkValidJSON(b *testing.B) {
	d := body(256)
	b.SetBytes(int64(len(d)))
	for b.Loop() {
		if !validJSON(d) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	d := body(256)
	b.SetBytes(int64(len(d)))
	for b.Loop() {
		if !json.Valid(d) {
			b.Fatal("invalid")
		}
	}
}

// TestPlainWord holds the eight-byte test to the byte table, on words
// built from the bytes at the edges of what a string may hold as it is.
func TestPlainWord(t *testing.T) {
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 'a', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var w [8]byte
		want := true
		for i := range w {
			w[i] = edges[r.IntN(len(edges))]
			want = want && plain[w[i]]
		}
		if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("plainWord(% x) = %t, want %t", w, got, want)
		}
	}
}

package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// FuzzFromTable holds fromTable to the header types the transport package
// documents, on tables of every field type amqp091-go's reader gives
// (read.go: bool, int8, uint8, int16, uint16, int32, uint32, int64,
// float32, float64, amqp.Decimal, string, []byte, time.Time, nil, nested
// amqp.Table and []any), nested as deep as it reads (32 below the
// headers): it never panics, hands back only documented types with the
// values they came with, drops x-acemq-publish-seq, and what it hands
// back can be published again (a copy carries a delivery's headers on).
//
//	go test -run '^$' -fuzz FuzzFromTable -fuzztime 60s ./transport/amqp
func FuzzFromTable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 'a', 0, 1, 'b', 11, 0xff, 0xff, 0xff, 0xfe, 1, 'c', 12, 5, 0, 0, 1, 0x3a})
	f.Add([]byte{2, 0, 15, 1, 'x', 16, 3, 13, 2, 'h', 'i', 14, 0, 0, 0, 0, 0x65, 0x5f, 0x4a, 0x80})
	f.Add(append([]byte{1, 1, 'd', 17, 32, 8}, bytes.Repeat([]byte{0xab}, 8)...))
	f.Add(append([]byte{1, 1, 'e', 17, 0xff, 16}, bytes.Repeat([]byte{4, 9}, 40)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := (&tableMaker{data: data}).table(0, true)
		out := fromTable(in)
		want := 0
		for k := range in {
			if k != seqHeader {
				want++
			}
		}
		if want == 0 {
			if out != nil {
				t.Fatalf("fromTable of %d entries, none kept: %#v, want nil", len(in), out)
			}
			return
		}
		if _, ok := out[seqHeader]; ok || len(out) != want {
			t.Fatalf("fromTable kept %d entries of %d (%s dropped: %v)", len(out), len(in), seqHeader, !ok)
		}
		for k, v := range out {
			agree(t, k, in[k], v)
		}
		back, err := toTable(out)
		if err == nil {
			err = back.Validate()
		}
		if err != nil {
			t.Fatalf("the headers fromTable hands back cannot be published again: %v", err)
		}
	})
}

// agree checks that got, what fromField made of sent, is of a documented
// header type (transport's package doc, and nil for a void field) and says
// what sent said.
func agree(t *testing.T, path string, sent, got any) {
	t.Helper()
	switch s := sent.(type) {
	case amqp.Table:
		m, ok := got.(map[string]any)
		if !ok || len(m) != len(s) {
			t.Fatalf("%s: table of %d entries came back as %T of %d", path, len(s), got, len(m))
		}
		for k, v := range s {
			agree(t, path+"."+k, v, m[k])
		}
	case []any:
		a, ok := got.([]any)
		if !ok || len(a) != len(s) {
			t.Fatalf("%s: array of %d came back as %T of %d", path, len(s), got, len(a))
		}
		for i, v := range s {
			agree(t, fmt.Sprintf("%s[%d]", path, i), v, a[i])
		}
	case uint8:
		same(t, path, got, int16(s))
	case uint16:
		same(t, path, got, int32(s))
	case uint32:
		same(t, path, got, int64(s))
	case amqp.Decimal:
		f, ok := got.(float64)
		exact, _ := strconv.ParseFloat(fmt.Sprintf("%de-%d", s.Value, s.Scale), 64)
		if !ok || (s.Scale <= 22 && f != exact) || math.Abs(f-exact) > 1e-15*math.Abs(exact) {
			t.Fatalf("%s: decimal %d scale %d came back as %T %v, want %v", path, s.Value, s.Scale, got, got, exact)
		}
	case time.Time:
		tt, ok := got.(time.Time)
		if !ok || !tt.Equal(s) || tt.Location() != time.UTC {
			t.Fatalf("%s: time %v came back as %T %v, want it in UTC", path, s, got, got)
		}
	case float32:
		if g, ok := got.(float32); !ok || math.Float32bits(g) != math.Float32bits(s) {
			t.Fatalf("%s: float32 %v came back as %T %v", path, s, got, got)
		}
	case float64:
		if g, ok := got.(float64); !ok || math.Float64bits(g) != math.Float64bits(s) {
			t.Fatalf("%s: float64 %v came back as %T %v", path, s, got, got)
		}
	case []byte:
		if g, ok := got.([]byte); !ok || !bytes.Equal(g, s) {
			t.Fatalf("%s: bytes %x came back as %T %v", path, s, got, got)
		}
	case nil, bool, int8, int16, int32, int64, string:
		same(t, path, got, sent)
	default:
		t.Fatalf("%s: the maker sent a %T, which amqp091-go never gives", path, sent)
	}
}

func same(t *testing.T, path string, got, want any) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %T %v, want %T %v", path, got, got, want, want)
	}
}

// tableMaker makes field tables from fuzz bytes, every value of a type
// amqp091-go's reader gives; past the end of the bytes it reads zeros.
type tableMaker struct {
	data []byte
	n    int
}

// maxDepth is how deeply amqp091-go reads containers below the headers.
const maxDepth = 32

func (m *tableMaker) byte() byte {
	if m.n >= len(m.data) {
		return 0
	}
	m.n++
	return m.data[m.n-1]
}

func (m *tableMaker) uint64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = m.byte()
	}
	return binary.BigEndian.Uint64(b[:])
}

func (m *tableMaker) string(max int) string {
	n := int(m.byte()) % (max + 1)
	b := make([]byte, n)
	for i := range b {
		b[i] = m.byte()
	}
	return string(b)
}

// table is a table at depth with up to 7 entries; at the top a name may be
// the transport's own sequence header.
func (m *tableMaker) table(depth int, top bool) amqp.Table {
	n := int(m.byte() % 8)
	t := make(amqp.Table, n)
	for range n {
		k := m.string(12)
		if top && k == "" {
			k = seqHeader
		}
		t[k] = m.field(depth + 1)
	}
	return t
}

// field is one value of a container at depth (1 for a header's own).
func (m *tableMaker) field(depth int) any {
	kind := m.byte() % 18
	if depth > maxDepth && kind >= 15 {
		kind %= 15 // no container deeper than amqp091-go reads
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return m.byte()&1 == 1
	case 2:
		return int8(m.byte())
	case 3:
		return m.byte()
	case 4:
		return int16(m.uint64())
	case 5:
		return uint16(m.uint64())
	case 6:
		return int32(m.uint64())
	case 7:
		return uint32(m.uint64())
	case 8:
		return int64(m.uint64())
	case 9:
		return math.Float32frombits(uint32(m.uint64()))
	case 10:
		return math.Float64frombits(m.uint64())
	case 11:
		return amqp.Decimal{Scale: m.byte(), Value: int32(m.uint64())}
	case 12:
		return m.string(40)
	case 13:
		return []byte(m.string(40))
	case 14:
		return time.Unix(int64(m.uint64()>>1)%(1<<40), 0) // as amqp091-go reads it: local time
	case 15:
		return m.table(depth, false)
	case 16:
		a := make([]any, m.byte()%6)
		for i := range a {
			a[i] = m.field(depth + 1)
		}
		return a
	default: // a chain of containers straight down, to reach the depth
		levels := int(m.byte()) % (maxDepth + 2 - depth)
		v := m.field(depth + levels)
		for i := range levels {
			if i%2 == 0 {
				v = amqp.Table{"n": v}
			} else {
				v = []any{v}
			}
		}
		return v
	}
}

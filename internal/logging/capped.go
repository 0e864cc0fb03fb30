package logging

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The caps on a string field, by what the field holds. Ids and names come
// from publishers and brokers and one line can carry several; a 100 KB id
// written whole on each of the four lines one message can cost is 400 KB
// of log, so each is cut to a prefix and a hash of the whole, which still
// finds the message: sha256 of the id, in hex, starts with the hash shown.
const (
	// IDCap bounds ids and names (the keys of idKeys): AMQP's own short
	// strings (message-id, correlation-id, queue, routing key) are at most
	// 255 bytes, so 256 cuts only an id that came in a header, which no
	// one types; a UUID is 36.
	IDCap = 256
	// TextCap bounds every other string, reasons and errors first: a
	// wrapped error with the broker's reason is a few hundred bytes, so
	// 4 KB keeps every one the library writes whole, while a reason a
	// producer wrote (x-acemq-error) or an error quoting a long id stays
	// one line.
	TextCap = 4 << 10
	// StackCap bounds a stack trace: a handler's panic is a few KB of
	// frames, and the deepest are the ones to keep.
	StackCap = 32 << 10
)

// idKeys are the fields that hold an id or a name.
var idKeys = map[string]bool{
	"id": true, "message_id": true, "correlation_id": true, "queue": true, "to": true, "from": true,
	"rung": true, "routing_key": true, "exchange": true, "destination": true, "consumer": true,
}

// stackKeys are the fields that hold a stack trace.
var stackKeys = map[string]bool{"stack": true, "stacktrace": true}

// capOf is the cap on the field named key.
func capOf(key string) int {
	switch {
	case idKeys[key]:
		return IDCap
	case stackKeys[key]:
		return StackCap
	}
	return TextCap
}

// Capped returns l writing every string field (zap.String, zap.ByteString,
// and an error's text) cut to its cap ([IDCap], [TextCap], [StackCap]) with
// a note of its length and the start of its SHA-256, so that no field a
// producer controls can make a line long. A field within its cap, which is
// every field of the usual line, passes untouched and unallocated. A
// logger capped already is returned as it is.
func Capped(l *zap.Logger) *zap.Logger {
	if _, ok := l.Core().(*cappedCore); ok {
		return l
	}
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &cappedCore{Core: c} }))
}

// cappedCore caps the fields on their way to Core.
//
// Its Check asks only whether Core is enabled and puts itself on the
// entry; its Write then lets Core check the entry as it would have, so
// that a sampler or a tee below still decides, and writes the capped
// fields to what Core's Check chose. Letting Core's Check put Core on
// the entry itself would have it write the fields as they came.
type cappedCore struct {
	zapcore.Core
}

func (c *cappedCore) With(fields []zapcore.Field) zapcore.Core {
	if capped, ok := capFields(fields); ok {
		fields = capped
	}
	return &cappedCore{Core: c.Core.With(fields)}
}

func (c *cappedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Core.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *cappedCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if capped, ok := capFields(fields); ok {
		fields = capped
	}
	if inner := c.Core.Check(e, nil); inner != nil {
		inner.Write(fields...)
	}
	return nil
}

// capFields returns fields with each one over its cap cut, and true, or
// false when none is over (and fields may be used as they are).
func capFields(fields []zapcore.Field) ([]zapcore.Field, bool) {
	var out []zapcore.Field
	for i, f := range fields {
		g, ok := capField(f)
		if !ok {
			continue
		}
		if out == nil {
			out = make([]zapcore.Field, len(fields))
			copy(out, fields)
		}
		out[i] = g
	}
	return out, out != nil
}

// capField is f cut to its cap, and true, or false when f is within it
// or is of a type that is not capped.
// Nothing within IDCap, the least cap, is looked at further: that is
// every field of the usual line, and costs a length test.
func capField(f zapcore.Field) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.StringType:
		if len(f.String) > IDCap {
			if limit := capOf(f.Key); len(f.String) > limit {
				return zap.String(f.Key, Cut(f.String, limit)), true
			}
		}
	case zapcore.ByteStringType:
		if b, _ := f.Interface.([]byte); len(b) > IDCap {
			if limit := capOf(f.Key); len(b) > limit {
				return zap.String(f.Key, cut(b, limit)), true
			}
		}
	case zapcore.ErrorType:
		err, _ := f.Interface.(error)
		if err == nil {
			return f, false
		}
		if s := safeError(err); len(s) > IDCap {
			if limit := capOf(f.Key); len(s) > limit {
				return zap.String(f.Key, Cut(s, limit)), true
			}
		}
	}
	return f, false
}

// safeError is err's text; an Error method that panics (a nil pointer
// behind the interface) reads as zap would write it.
func safeError(err error) (s string) {
	defer func() {
		if recover() != nil {
			s = "<PANIC in Error>"
		}
	}()
	return err.Error()
}

// Cut is s if it is at most limit bytes, else its first limit bytes (cut
// back to a whole UTF-8 sequence) and "…(N bytes, sha256:<16 hex>)": the
// length and the start of the SHA-256 of the whole of s.
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// Read in place: cut neither keeps nor changes its bytes, and a copy
	// of a long field is what the cap is there to save.
	return cut(unsafe.Slice(unsafe.StringData(s), len(s)), limit)
}

// cut is Cut of b, which is longer than limit; it does not keep b.
func cut(b []byte, limit int) string {
	n := max(limit, 0)
	for back := 0; back < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(b[n]); back++ {
		n-- // b[n] continues a sequence that b[:n] would split
	}
	sum := sha256.Sum256(b)
	out := make([]byte, 0, n+64)
	out = append(out, b[:n]...)
	out = append(out, "…("...)
	out = strconv.AppendInt(out, int64(len(b)), 10)
	out = append(out, " bytes, sha256:"...)
	out = hex.AppendEncode(out, sum[:8])
	out = append(out, ')')
	return string(out)
}

package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq/internal/logging/logtest"
)

func TestLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zap            zapcore.Level
		slog           slog.Level
		fromSlog, dflt bool // recorded by FromSlog, by the default
	}{
		{zapcore.DebugLevel, slog.LevelDebug, true, false},
		{zapcore.InfoLevel, slog.LevelInfo, true, false},
		{zapcore.WarnLevel, slog.LevelWarn, true, true},
		{zapcore.ErrorLevel, slog.LevelError, true, true},
		{zapcore.DPanicLevel, slog.LevelError + 1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.zap.String(), func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				name string
				log  func(slog.Handler) *zap.Logger
				want bool
			}{
				{"FromSlog", func(h slog.Handler) *zap.Logger { return FromSlog(slog.New(h)) }, tt.fromSlog},
				{"default", defaultTo, tt.dflt},
			} {
				rec := logtest.New(slog.LevelDebug)
				c.log(rec).Log(tt.zap, "line")
				got := rec.Entries()
				if !c.want {
					if len(got) != 0 {
						t.Errorf("%s: %s recorded, want nothing", c.name, tt.zap)
					}
					continue
				}
				if len(got) != 1 || got[0].Level != tt.slog || got[0].Message != "line" {
					t.Errorf("%s: %s recorded %+v, want one line at %s", c.name, tt.zap, got, tt.slog)
				}
			}
		})
	}
}

// The handler's own level is asked: a line below it is not even built.
func TestHandlerLevel(t *testing.T) {
	t.Parallel()
	rec := logtest.New(slog.LevelError)
	l := FromSlog(slog.New(rec))
	if ce := l.Check(zapcore.WarnLevel, "warn"); ce != nil {
		t.Error("a warning checked in for a handler at error")
	}
	l.Error("error")
	if got := rec.Entries(); len(got) != 1 {
		t.Errorf("recorded %d lines, want the error only", len(got))
	}
}

type point struct{ x, y int }

func (p point) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt("x", p.x)
	enc.AddInt("y", p.y)
	enc.AddDuration("took", time.Second)
	return enc.AddObject("origin", origin{})
}

type origin struct{}

func (origin) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", "zero")
	return nil
}

type stringer struct{}

func (stringer) String() string { return "stringed" }

func TestFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	errBoom := errors.New("boom")
	tests := []struct {
		name  string
		field zap.Field
		want  map[string]slog.Value
	}{
		{"string", zap.String("k", "v"), map[string]slog.Value{"k": slog.StringValue("v")}},
		{"int", zap.Int("k", -3), map[string]slog.Value{"k": slog.Int64Value(-3)}},
		{"int8", zap.Int8("k", -3), map[string]slog.Value{"k": slog.Int64Value(-3)}},
		{"uint", zap.Uint32("k", 3), map[string]slog.Value{"k": slog.Uint64Value(3)}},
		{"bool", zap.Bool("k", true), map[string]slog.Value{"k": slog.BoolValue(true)}},
		{"float", zap.Float64("k", 1.5), map[string]slog.Value{"k": slog.Float64Value(1.5)}},
		{"float32", zap.Float32("k", 1.5), map[string]slog.Value{"k": slog.Float64Value(1.5)}},
		{"duration", zap.Duration("k", 40*time.Second), map[string]slog.Value{"k": slog.DurationValue(40 * time.Second)}},
		{"stringer duration", zap.Stringer("k", 40*time.Second), map[string]slog.Value{"k": slog.StringValue("40s")}},
		{"stringer", zap.Stringer("k", stringer{}), map[string]slog.Value{"k": slog.StringValue("stringed")}},
		{"time", zap.Time("k", at), map[string]slog.Value{"k": slog.TimeValue(at)}},
		{"byte string", zap.ByteString("k", []byte("bytes")), map[string]slog.Value{"k": slog.StringValue("bytes")}},
		{"error", zap.Error(errBoom), map[string]slog.Value{"error": slog.AnyValue(errBoom)}},
		{"nil error", zap.Error(nil), map[string]slog.Value{}},
		{"skip", zap.Skip(), map[string]slog.Value{}},
		{"complex", zap.Complex128("k", 1+2i), map[string]slog.Value{"k": slog.StringValue("(1+2i)")}},
		{"object", zap.Object("p", point{1, 2}), map[string]slog.Value{
			"p.x": slog.Int64Value(1), "p.y": slog.Int64Value(2),
			"p.took": slog.DurationValue(time.Second), "p.origin.name": slog.StringValue("zero"),
		}},
		{"inline", zap.Inline(origin{}), map[string]slog.Value{"name": slog.StringValue("zero")}},
		{"strings", zap.Strings("k", []string{"a", "b"}), map[string]slog.Value{"k": slog.AnyValue([]any{"a", "b"})}},
		{"reflected", zap.Reflect("k", map[string]int{"a": 1}), map[string]slog.Value{"k": slog.AnyValue(map[string]int{"a": 1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := logtest.New(slog.LevelDebug)
			FromSlog(slog.New(rec)).Info("line", tt.field)
			got := rec.Entries()
			if len(got) != 1 {
				t.Fatalf("recorded %d lines, want 1", len(got))
			}
			checkAttrs(t, got[0].Attrs, tt.want)
		})
	}
}

func checkAttrs(tb testing.TB, got, want map[string]slog.Value) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Errorf("attrs %v, want %v", got, want)
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			tb.Errorf("no attr %q in %v", k, got)
		case g.Kind() != w.Kind():
			tb.Errorf("attr %q is a %s (%v), want a %s (%v)", k, g.Kind(), g, w.Kind(), w)
		case g.String() != w.String():
			tb.Errorf("attr %q = %v, want %v", k, g, w)
		}
	}
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	rec := logtest.New(slog.LevelDebug)
	FromSlog(slog.New(rec)).Info("line", zap.String("a", "1"), zap.Namespace("ns"), zap.String("b", "2"), zap.Int("c", 3))
	checkAttrs(t, rec.Entries()[0].Attrs, map[string]slog.Value{
		"a": slog.StringValue("1"), "ns.b": slog.StringValue("2"), "ns.c": slog.Int64Value(3),
	})
}

// With's fields reach every later line, on a handler of the caller's and
// on slog.Default()'s (where they are kept and applied at each line), and a
// namespace in With holds the fields of the lines after it.
func TestWith(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		log  func(slog.Handler) *zap.Logger
	}{
		{"FromSlog", func(h slog.Handler) *zap.Logger { return FromSlog(slog.New(h)) }},
		{"default", defaultTo},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := logtest.New(slog.LevelDebug)
			base := c.log(rec)
			l := base.With(zap.String("queue", "orders"), zap.Stringer("wait", time.Minute)).
				With(zap.Namespace("hop"), zap.String("to", "orders.dlq"))
			l.Warn("one", zap.String("id", "m-1"))
			l.Warn("two", zap.String("id", "m-2"))
			base.Warn("plain")
			got := rec.Entries()
			if len(got) != 3 {
				t.Fatalf("recorded %d lines, want 3", len(got))
			}
			for i, id := range []string{"m-1", "m-2"} {
				checkAttrs(t, got[i].Attrs, map[string]slog.Value{
					"queue": slog.StringValue("orders"), "wait": slog.StringValue("1m0s"),
					"hop.to": slog.StringValue("orders.dlq"), "hop.id": slog.StringValue(id),
				})
			}
			checkAttrs(t, got[2].Attrs, map[string]slog.Value{})
		})
	}
}

func TestEntry(t *testing.T) {
	t.Parallel()
	rec := logtest.New(slog.LevelDebug)
	l := FromSlog(slog.New(rec)).Named("relay").WithOptions(zap.AddStacktrace(zapcore.ErrorLevel))
	_, file, _, _ := runtime.Caller(0)
	l.Error("line")
	got := rec.Entries()[0]
	if got.Attrs["logger"].String() != "relay" {
		t.Errorf("logger = %v, want relay", got.Attrs["logger"])
	}
	if !strings.Contains(got.Attrs["stacktrace"].String(), "TestEntry") {
		t.Errorf("stacktrace %q does not name the test", got.Attrs["stacktrace"])
	}
	f, _ := runtime.CallersFrames([]uintptr{got.PC}).Next()
	if filepath.Base(f.File) != filepath.Base(file) {
		t.Errorf("source %s:%d, want the line in %s", f.File, f.Line, file)
	}
}

// Through a real handler: the line a slog user reads.
func TestTextHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	FromSlog(slog.New(h)).Error("acemq: rung missing", zap.String("queue", "orders"), zap.Stringer("wait", 40*time.Second), zap.Error(errors.New("boom")))
	want := `level=ERROR msg="acemq: rung missing" queue=orders wait=40s error=boom` + "\n"
	if buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
}

func TestOr(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	Or(zap.New(core)).Info("kept")
	if logs.Len() != 1 {
		t.Error("Or did not write to the logger it was given")
	}
	if Or(nil) != fallback {
		t.Error("Or(nil) is not the shared default")
	}
}

// The default looks slog.Default() up at each line. Not parallel: it sets
// the global (the parallel tests wait until it is done).
func TestDefaultIsSlogDefault(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	l := Or(nil).With(zap.String("queue", "orders")) // made before SetDefault
	rec := logtest.New(slog.LevelDebug)
	slog.SetDefault(slog.New(rec))
	l.Info("quiet")
	l.Warn("loud")
	FromSlog(nil).Info("every level")
	got := rec.Entries()
	if len(got) != 2 || got[0].Message != "loud" || got[1].Message != "every level" {
		t.Fatalf("recorded %+v, want loud and every level", got)
	}
	checkAttrs(t, got[0].Attrs, map[string]slog.Value{"queue": slog.StringValue("orders")})
}

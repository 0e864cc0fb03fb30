// Package logging is the library's one logging path: every package logs
// through a *zap.Logger, and this package gives them the default a nil
// logger means, and the zapcore.Core that writes to a slog.Handler behind
// acemq.FromSlog.
//
// zap's own bridge (go.uber.org/zap/exp/zapslog) goes the other way, a
// slog.Handler over a zap core; a core over a slog.Handler is on its to-do
// list (uber-go/zap#1333) and nowhere well kept, hence this one.
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// FromSlog returns a logger that writes every level to l's handler; a nil
// l means slog.Default(), as it is when each line is written.
func FromSlog(l *slog.Logger) *zap.Logger {
	var h slog.Handler
	if l != nil {
		h = l.Handler()
	}
	return newLogger(h, zapcore.DebugLevel)
}

// Or is l, or the default for a nil l: warnings and errors to
// slog.Default() (as net/http falls back on the log package), so the
// failures the docs promise are loud are loud without a logger set.
// zap.NewNop() is how a caller asks for nothing. Either way the logger is
// [Capped]: every component takes its logger through Or, so this is the
// one place where an id or reason of a producer's making is kept from
// making a line long.
func Or(l *zap.Logger) *zap.Logger {
	if l != nil {
		return Capped(l)
	}
	return fallback
}

// fallback is shared: it looks slog.Default() up at each line, so a
// slog.SetDefault after the server or transport was made still counts.
var fallback = Capped(defaultTo(nil))

// defaultTo is the default with h in place of slog.Default()'s handler,
// for tests that must not change the global.
func defaultTo(h slog.Handler) *zap.Logger { return newLogger(h, zapcore.WarnLevel) }

// newLogger writes what reaches floor to h (nil: slog.Default()'s). The
// floor is in the core rather than zap.IncreaseLevel, which checks the
// core's levels once, when made: slog.Default()'s may change after.
// AddCaller gives a handler with AddSource its source line; like slog's
// own, the caller is looked up only for a line that is written.
func newLogger(h slog.Handler, floor zapcore.Level) *zap.Logger {
	return zap.New(&core{h: h, floor: floor}, zap.AddCaller())
}

// core is a zapcore.Core over a slog.Handler.
type core struct {
	h     slog.Handler // nil: slog.Default()'s, looked up at each line
	ops   []op         // With's fields while h is nil, applied at each line
	floor zapcore.Level
}

// op is one step of With on a handler: attrs, or a group (a zap
// namespace) that every later attr goes into.
type op struct {
	group string
	attrs []slog.Attr
}

func (o op) apply(h slog.Handler) slog.Handler {
	if o.group != "" {
		return h.WithGroup(o.group)
	}
	return h.WithAttrs(o.attrs)
}

func (c *core) handler() slog.Handler {
	if c.h != nil {
		return c.h
	}
	h := slog.Default().Handler()
	for _, o := range c.ops {
		h = o.apply(h)
	}
	return h
}

func (c *core) Enabled(l zapcore.Level) bool {
	if l < c.floor {
		return false
	}
	h := c.h
	if h == nil {
		h = slog.Default().Handler() // attrs do not change what is enabled
	}
	return h.Enabled(context.Background(), slogLevel(l))
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	ops := opsOf(fields)
	if c.h == nil {
		return &core{ops: append(slices.Clip(c.ops), ops...), floor: c.floor}
	}
	h := c.h
	for _, o := range ops {
		h = o.apply(h)
	}
	return &core{h: h, floor: c.floor}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	var pc uintptr
	if e.Caller.Defined {
		pc = e.Caller.PC
	}
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, pc)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	if e.Stack != "" {
		r.AddAttrs(slog.String("stacktrace", e.Stack))
	}
	return c.handler().Handle(context.Background(), r)
}

// Sync has nothing to flush: a slog.Handler writes as it handles.
func (c *core) Sync() error { return nil }

// slogLevel is the slog level of a zap level: debug, info, warn and error as
// themselves, DPanic, Panic and Fatal above error (ERROR+1, +2, +3).
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError + slog.Level(l-zapcore.ErrorLevel)
}

// attrs converts fields; a namespace puts every later field in a group.
func attrs(fields []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fields))
	for i, f := range fields {
		if f.Type == zapcore.NamespaceType {
			return append(out, slog.Attr{Key: f.Key, Value: slog.GroupValue(attrs(fields[i+1:])...)})
		}
		out = appendField(out, f)
	}
	return out
}

// opsOf converts With's fields, a namespace opening a group.
func opsOf(fields []zapcore.Field) []op {
	var ops []op
	var cur []slog.Attr
	for _, f := range fields {
		if f.Type != zapcore.NamespaceType {
			cur = appendField(cur, f)
			continue
		}
		if len(cur) > 0 {
			ops, cur = append(ops, op{attrs: cur}), nil
		}
		ops = append(ops, op{group: f.Key})
	}
	if len(cur) > 0 {
		ops = append(ops, op{attrs: cur})
	}
	return ops
}

// appendField appends f as slog would carry it: numbers, strings, bools,
// durations and times as themselves; an error as the error (slog's
// handlers write its Error()); objects as groups. The rest goes through
// zap's own map encoder, so Stringer, ByteString and the marshalers read
// as they would in a zap encoder.
func appendField(out []slog.Attr, f zapcore.Field) []slog.Attr {
	switch f.Type {
	case zapcore.SkipType:
		return out
	case zapcore.StringType:
		return append(out, slog.String(f.Key, f.String))
	case zapcore.BoolType:
		return append(out, slog.Bool(f.Key, f.Integer == 1))
	case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type:
		return append(out, slog.Int64(f.Key, f.Integer))
	case zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type, zapcore.UintptrType:
		return append(out, slog.Uint64(f.Key, uint64(f.Integer)))
	case zapcore.DurationType:
		return append(out, slog.Duration(f.Key, time.Duration(f.Integer)))
	case zapcore.TimeType:
		t := time.Unix(0, f.Integer)
		if loc, ok := f.Interface.(*time.Location); ok {
			t = t.In(loc)
		}
		return append(out, slog.Time(f.Key, t))
	case zapcore.TimeFullType:
		return append(out, slog.Time(f.Key, f.Interface.(time.Time)))
	case zapcore.ErrorType:
		return append(out, slog.Any(f.Key, f.Interface))
	case zapcore.ReflectType:
		return append(out, slog.Any(f.Key, f.Interface))
	}
	enc := zapcore.NewMapObjectEncoder()
	f.AddTo(enc)
	return append(out, mapAttrs(enc.Fields)...)
}

// mapAttrs converts what a map encoder holds, by key: a map has no order.
func mapAttrs(m map[string]any) []slog.Attr {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	out := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		out = append(out, slog.Attr{Key: k, Value: value(m[k])})
	}
	return out
}

func value(v any) slog.Value {
	switch v := v.(type) {
	case map[string]any:
		return slog.GroupValue(mapAttrs(v)...)
	case complex128, complex64:
		return slog.StringValue(fmt.Sprint(v)) // encoding/json has no complex numbers
	}
	return slog.AnyValue(v)
}

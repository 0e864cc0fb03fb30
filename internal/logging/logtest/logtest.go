// Package logtest is a slog.Handler that records, for tests of what the
// library logs through acemq.FromSlog.
package logtest

import (
	"context"
	"log/slog"
	"maps"
	"sync"
)

// Entry is one record, its attributes (With's included) by their path:
// "key", or "group.key" inside a group.
type Entry struct {
	Level   slog.Level
	Message string
	PC      uintptr
	Attrs   map[string]slog.Value
}

// Recorder records every record at or above Min. Handlers derived from it
// by WithAttrs and WithGroup record into the same list.
type Recorder struct {
	Min slog.Level

	log    *journal
	prefix string
	pre    map[string]slog.Value
}

type journal struct {
	mu      sync.Mutex
	entries []Entry
}

// New returns a recorder of min and above.
func New(min slog.Level) *Recorder { return &Recorder{Min: min, log: &journal{}} }

// Entries returns what was recorded so far.
func (r *Recorder) Entries() []Entry {
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return append([]Entry(nil), r.log.entries...)
}

func (r *Recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.Min }

func (r *Recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.pre = maps.Clone(r.pre)
	if c.pre == nil {
		c.pre = map[string]slog.Value{}
	}
	for _, a := range as {
		flatten(c.pre, r.prefix, a)
	}
	return &c
}

func (r *Recorder) WithGroup(name string) slog.Handler {
	c := *r
	c.prefix += name + "."
	return &c
}

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	m := maps.Clone(r.pre)
	if m == nil {
		m = map[string]slog.Value{}
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(m, r.prefix, a)
		return true
	})
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	r.log.entries = append(r.log.entries, Entry{Level: rec.Level, Message: rec.Message, PC: rec.PC, Attrs: m})
	return nil
}

func flatten(m map[string]slog.Value, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		m[prefix+a.Key] = v
		return
	}
	p := prefix
	if a.Key != "" {
		p += a.Key + "."
	}
	for _, g := range v.Group() {
		flatten(m, p, g)
	}
}

package main

import (
	"strings"
	"time"

	"github.com/acemq/acemq/internal/escape"
)

// How status and the dashboard say a breaker (breaker_mark.go): its state
// and times as an operator reads them, every string from the marker
// escaped (escape.String), as whoever declared it wrote it.

// breakerWhen says when a breaker changed state and, open, when it probes
// again: "since 09:01:02Z (12m ago), probes at 09:13:02Z (in 48s)", the
// date before a time of another day than now's.
func breakerWhen(now time.Time, m breakerMark) string {
	var parts []string
	if m.Since != nil {
		parts = append(parts, "since "+clockText(now, *m.Since))
	}
	switch {
	case m.State == breakerHalfOpen:
		parts = append(parts, "probing one message at a time")
	case m.Until != nil:
		parts = append(parts, "probes at "+clockText(now, *m.Until))
	}
	return strings.Join(parts, ", ")
}

// breakerText is a breaker in one line, for the terminal: "open since
// 09:01:02Z (12m ago), probes at 09:13:02Z (in 48s): why (note)".
func breakerText(now time.Time, m breakerMark) string {
	s := escape.String(orDash(m.State))
	if when := breakerWhen(now, m); when != "" {
		s += " " + when
	}
	if m.Why != "" {
		s += ": " + escape.String(m.Why)
	}
	if m.Note != "" {
		s += " (" + escape.String(m.Note) + ")"
	}
	return s
}

// clockText is a time to the second, in UTC, and how far it is from now.
func clockText(now, t time.Time) string {
	t, now = t.UTC(), now.UTC()
	layout := "15:04:05Z"
	if y, m, d := t.Date(); y != now.Year() || m != now.Month() || d != now.Day() {
		layout = stamp
	}
	d := t.Sub(now).Truncate(time.Second)
	rel := "now"
	switch {
	case d > 0:
		rel = "in " + span(d)
	case d < 0:
		rel = span(-d) + " ago"
	}
	return t.Format(layout) + " (" + rel + ")"
}

// breakerClass is the dashboard's CSS class for a state: one of a fixed
// few, whatever a foreign marker wrote.
func breakerClass(state string) string {
	switch state {
	case breakerOpen, breakerHalfOpen:
		return state
	}
	return "unknown"
}

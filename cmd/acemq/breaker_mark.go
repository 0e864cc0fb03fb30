package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Breaker markers: while a queue's circuit breaker is open or half-open,
// each server instance consuming it keeps an exclusive queue
// Q.breaker.<instance> whose arguments are the breaker's state
// (docs/wire-contract.md, "Breaker markers"). status and the dashboard
// read them from the management API's listing. What makes a queue a
// marker is its arguments, not its name: a queue that happens to be named
// x.breaker.y without them is an ordinary queue, and the queue a marker
// belongs to is its x-acemq-breaker-queue argument, never its name (a name
// past 255 bytes is cut and ends in a hash).

// The marker's arguments, as the wire contract names them.
const (
	markerArgPrefix    = "x-acemq-breaker-"
	argBreakerQueue    = markerArgPrefix + "queue"
	argBreakerState    = markerArgPrefix + "state"
	argBreakerSince    = markerArgPrefix + "since"
	argBreakerUntil    = markerArgPrefix + "until"
	argBreakerWhy      = markerArgPrefix + "why"
	argBreakerInstance = markerArgPrefix + "instance"
)

// The states a marker can say; a closed breaker has no marker.
const (
	breakerOpen     = "open"
	breakerHalfOpen = "half-open"
)

// maxBreakerWhy is the contract's bound on x-acemq-breaker-why; a longer
// one (a foreign marker) is cut, and said to be.
const maxBreakerWhy = 1024

// breakerMark is one instance's breaker on a queue, as its marker says it.
// What the marker does not say, or says in the wrong type, is left out
// and Note says so: a foreign or broken marker is shown with what can be
// read.
type breakerMark struct {
	Instance string     `json:"instance"`
	State    string     `json:"state"`           // open or half-open; as written when it is neither (Note says so)
	Since    *time.Time `json:"since,omitempty"` // when it entered State
	Until    *time.Time `json:"until,omitempty"` // when an open breaker probes again
	// Why is why it opened, as the breaker says it: producer-controlled
	// text (error strings), redacted when status reads it, to be escaped
	// wherever it is shown.
	Why    string `json:"why,omitempty"`
	Marker string `json:"marker"` // the marker queue's name
	Note   string `json:"note,omitempty"`
	queue  string // the queue it belongs to
}

// markerOf reads q as a breaker marker: ok when any of its arguments is a
// marker's (x-acemq-breaker-*). The queue it belongs to is its
// x-acemq-breaker-queue; a marker without one is shown under the name's
// part before ".breaker." (or under its own name when there is none), and
// its Note says so.
func markerOf(q mgmtQueue) (breakerMark, bool) {
	args := map[string]json.RawMessage{}
	if raw := bytes.TrimSpace(q.Arguments); len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
		return breakerMark{}, false // none, or [] from an older broker
	}
	if !slices.ContainsFunc(keys(args), func(k string) bool { return strings.HasPrefix(k, markerArgPrefix) }) {
		return breakerMark{}, false
	}
	m := breakerMark{Marker: q.Name}
	var notes []string
	note := func(s string) {
		if s != "" {
			notes = append(notes, s)
		}
	}
	var problem string
	m.queue, problem = argString(args, argBreakerQueue)
	if m.queue == "" {
		owner, guessed := q.Name, "and its name is not Q.breaker.<instance>: shown under its own name"
		if i := strings.LastIndex(q.Name, ".breaker."); i > 0 {
			owner, guessed = q.Name[:i], "its queue is taken from its name, which may be cut"
		}
		m.queue = owner
		note(cmp.Or(problem, argBreakerQueue+" is empty") + ": " + guessed)
	}
	m.State, problem = argString(args, argBreakerState)
	note(problem)
	if problem == "" && m.State != breakerOpen && m.State != breakerHalfOpen {
		note(fmt.Sprintf("%s is %q, neither open nor half-open", argBreakerState, m.State))
	}
	m.Since, problem = argMillis(args, argBreakerSince)
	note(problem)
	if until, problem := argMillis(args, argBreakerUntil); m.State != breakerHalfOpen { // absent while half-open
		m.Until = until
		note(problem)
	}
	if why, problem := argString(args, argBreakerWhy); problem == "" {
		m.Why = why
		if len(why) > maxBreakerWhy {
			cut := maxBreakerWhy
			for cut > 0 && !utf8.RuneStart(why[cut]) {
				cut--
			}
			m.Why = why[:cut] + "…"
			note(fmt.Sprintf("%s is %d bytes, past the contract's %d: cut", argBreakerWhy, len(why), maxBreakerWhy))
		}
	} else if _, there := args[argBreakerWhy]; there {
		note(problem) // an open breaker may have no reason to give; a wrong type is a broken marker
	}
	m.Instance, problem = argString(args, argBreakerInstance)
	note(problem)
	if !q.Exclusive {
		note("not exclusive: it outlives the connection that declared it and may be stale")
	}
	m.Note = strings.Join(notes, "; ")
	return m, true
}

// argString reads a string argument; problem says why it could not be.
func argString(args map[string]json.RawMessage, key string) (s, problem string) {
	raw, ok := args[key]
	if !ok {
		return "", key + " is missing"
	}
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", key + " is not a string"
	}
	return s, ""
}

// argMillis reads an int64 argument of Unix milliseconds as a time in
// UTC; problem says why it could not be.
func argMillis(args map[string]json.RawMessage, key string) (t *time.Time, problem string) {
	raw, ok := args[key]
	if !ok {
		return nil, key + " is missing"
	}
	ms, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return nil, key + " is not an integer of Unix milliseconds"
	}
	if ms <= 0 {
		return nil, fmt.Sprintf("%s is %d, no time", key, ms)
	}
	at := time.UnixMilli(ms).UTC()
	return &at, ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// redactBreakers redacts each breaker's Why (error text, which may quote
// a URL with its password) as other error text is.
func redactBreakers(services []service, redact func(string) string) {
	for i := range services {
		for j := range services[i].Breakers {
			services[i].Breakers[j].Why = redact(services[i].Breakers[j].Why)
		}
		for _, p := range services[i].Partitions { // a partition's breakers are its own
			for k := range p.Breakers {
				p.Breakers[k].Why = redact(p.Breakers[k].Why)
			}
		}
	}
}

// Package triage groups failed messages by why they failed, so that an
// operator reading a .dlq or .parked queue sees five causes instead of five
// thousand messages. Two reasons are in one group when they are the same
// once what varies from message to message is taken out: ids and UUIDs,
// numbers, hex, quoted values. The command line's triage uses it, and so
// can a dashboard: it does no I/O.
package triage

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Message is what a group needs of one message.
type Message struct {
	ID      string
	Reason  string // x-acemq-error, or the broker's reason from x-death
	Attempt int
	// Created is x-acemq-created (or the AMQP timestamp); zero when unknown.
	Created time.Time
	// DeadLettered is when the broker dead-lettered it (the newest x-death
	// entry's time); zero when unknown, as for a library's dead letter.
	DeadLettered time.Time
	Body         []byte
	// Queue is the queue it was read from, when a group spans several
	// (the partitions' .dlq of a partitioned queue); empty for one.
	Queue string
}

// Group is the messages of one normalised reason.
type Group struct {
	// ID names the group on a command line: a short hash of Key, the same
	// for the same reason on every run and every queue.
	ID string `json:"id"`
	// Kind is the reason's prefix as a word: exhausted, max-age, rejected,
	// undecodable, no-policy, broker, unwritable, no-answer, timeout, other,
	// none.
	Kind string `json:"kind"`
	// Key is the reason normalised: what every message of the group shares.
	Key   string `json:"key"`
	Count int    `json:"count"`
	// FirstCreated and LastCreated are the oldest and newest creation
	// times; nil when no message of the group carries one.
	FirstCreated *time.Time `json:"first_created,omitempty"`
	LastCreated  *time.Time `json:"last_created,omitempty"`
	// FirstDeadLettered and LastDeadLettered, from x-death; nil when no
	// message of the group carries one.
	FirstDeadLettered *time.Time `json:"first_dead_lettered,omitempty"`
	LastDeadLettered  *time.Time `json:"last_dead_lettered,omitempty"`
	MinAttempt        int        `json:"min_attempt"`
	MaxAttempt        int        `json:"max_attempt"`
	// SampleID, SampleReason and SampleBody are the first message's.
	SampleID     string `json:"sample_id"`
	SampleReason string `json:"sample_reason"`
	SampleBody   []byte `json:"-"`
	// SampleQueue and Queues, for messages read from several queues
	// (Message.Queue): the queue of the sample, and how many of the group
	// each queue holds, in the order they were first read.
	SampleQueue string       `json:"sample_queue,omitempty"`
	Queues      []QueueCount `json:"queues,omitempty"`
}

// QueueCount is how many of a group one queue holds.
type QueueCount struct {
	Queue string `json:"queue"`
	Count int    `json:"count"`
}

// Grouper collects messages into groups.
type Grouper struct {
	groups map[string]*Group
}

// Add puts m into its group.
func (g *Grouper) Add(m Message) {
	if g.groups == nil {
		g.groups = map[string]*Group{}
	}
	key := Key(m.Reason)
	gr := g.groups[key]
	if gr == nil {
		gr = &Group{ID: ID(key), Kind: Kind(m.Reason), Key: key, MinAttempt: m.Attempt, MaxAttempt: m.Attempt,
			SampleID: m.ID, SampleReason: m.Reason, SampleBody: slices.Clone(m.Body), SampleQueue: m.Queue}
		g.groups[key] = gr
	}
	gr.Count++
	if m.Queue != "" {
		if n := len(gr.Queues); n > 0 && gr.Queues[n-1].Queue == m.Queue {
			gr.Queues[n-1].Count++
		} else if i := slices.IndexFunc(gr.Queues, func(c QueueCount) bool { return c.Queue == m.Queue }); i >= 0 {
			gr.Queues[i].Count++
		} else {
			gr.Queues = append(gr.Queues, QueueCount{Queue: m.Queue, Count: 1})
		}
	}
	gr.MinAttempt = min(gr.MinAttempt, m.Attempt)
	gr.MaxAttempt = max(gr.MaxAttempt, m.Attempt)
	widen(&gr.FirstCreated, &gr.LastCreated, m.Created)
	widen(&gr.FirstDeadLettered, &gr.LastDeadLettered, m.DeadLettered)
}

func widen(first, last **time.Time, t time.Time) {
	if t.IsZero() {
		return
	}
	t = t.UTC()
	if *first == nil || t.Before(**first) {
		*first = &t
	}
	if *last == nil || t.After(**last) {
		*last = &t
	}
}

// Groups returns the groups, the largest first (then by key).
func (g *Grouper) Groups() []Group {
	out := make([]Group, 0, len(g.groups))
	for _, gr := range g.groups {
		c := *gr
		c.Queues = slices.Clone(gr.Queues)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Group) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// Total is the number of messages added.
func (g *Grouper) Total() int {
	n := 0
	for _, gr := range g.groups {
		n += gr.Count
	}
	return n
}

// ID is the group id of a normalised reason: "g" and 8 hex digits.
func ID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "g" + hex.EncodeToString(sum[:4])
}

// Matches reports whether a message's reason belongs to the group named
// by sel: its ID, or its Key exactly.
func Matches(sel, reason string) bool {
	key := Key(reason)
	return sel == ID(key) || sel == key
}

// NoReason is the key of messages without a reason.
const NoReason = "(no reason)"

// kinds are the reasons' fixed prefixes (docs/wire-contract.md), longest
// match first where one is the start of another.
var kinds = []struct{ prefix, kind string }{
	{"exhausted ", "exhausted"},
	{"exceeded the maximum message age of ", "max-age"},
	{"the handler rejected it: ", "rejected"},
	{"the handler parked it: ", "parked"},
	{"could not be decoded: ", "undecodable"},
	{"retry requested but no retry policy is set", "no-policy"},
	{"the broker dead-lettered it from queue ", "broker"},
	{"could not be written: ", "unwritable"},
	{"the handler returned no answer", "no-answer"},
	{"the handler ran past its timeout of ", "timeout"},
}

// Kind is the word for a reason's prefix.
func Kind(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "none"
	}
	for _, k := range kinds {
		if strings.HasPrefix(reason, k.prefix) {
			return k.kind
		}
	}
	return "other"
}

var (
	reUUID    = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reHex0x   = regexp.MustCompile(`\b0[xX][0-9a-fA-F]+\b`)
	reHexLong = regexp.MustCompile(`\b[0-9a-fA-F]{8,}\b`)
	// Quoted values, opened after a start, a space or punctuation so that
	// an apostrophe (can't) opens none.
	reQuoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|(^|[\\s=:(\\[{,])'[^'\\n]*'|`[^`]*`")
	// Numbers; an HTTP status after its word is kept (503 is not 404).
	reNumber = regexp.MustCompile(`(?i)\b(?:https?|status|code)[ :=]*[1-5]\d\d\b|\d+(?:[.,]\d+)*`)
	reSpace  = regexp.MustCompile(`\s+`)
)

// Key is reason normalised: quoted values become "<q>", UUIDs <uuid>, hex
// of 8 digits or more (digits and letters) and 0x numbers <hex>, other
// numbers <n> (an HTTP status after "HTTP", "status" or "code" is kept),
// runs of white space one space. "exhausted 5 attempts: order 8812 for
// customer "c-77": HTTP 503" reads "exhausted <n> attempts: order <n> for
// customer "<q>": HTTP 503".
func Key(reason string) string {
	s := strings.TrimSpace(reason)
	if s == "" {
		return NoReason
	}
	s = reQuoted.ReplaceAllStringFunc(s, func(q string) string {
		switch {
		case q[0] == '"':
			return `"<q>"`
		case q[0] == '`':
			return "`<q>`"
		}
		open := strings.IndexByte(q, '\'')
		return q[:open] + "'<q>'"
	})
	s = reUUID.ReplaceAllString(s, "<uuid>")
	s = reHex0x.ReplaceAllString(s, "<hex>")
	s = reHexLong.ReplaceAllStringFunc(s, func(h string) string {
		if strings.ContainsAny(h, "0123456789") && strings.ContainsAny(h, "abcdefABCDEF") {
			return "<hex>"
		}
		return h
	})
	s = reNumber.ReplaceAllStringFunc(s, func(n string) string {
		if c := n[0]; c < '0' || c > '9' {
			return n
		}
		return "<n>"
	})
	return reSpace.ReplaceAllString(s, " ")
}

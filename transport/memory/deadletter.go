package memory

import (
	"maps"
	"slices"
	"time"

	"github.com/acemq/acemq/transport"
)

// Dead-lettering reasons, as RabbitMQ writes them in x-death.
const (
	reasonExpired       = "expired"
	reasonRejected      = "rejected"
	reasonDeliveryLimit = "delivery_limit"
	reasonMaxLen        = "maxlen"
)

// deadLetter republishes m, which left q for reason, through q's
// dead-letter exchange as RabbitMQ 3.10 does: x-death updated, the
// exchange and routing key those of the dead-lettering, the expiration
// gone. Without a dead-letter exchange, or when it is missing, the message
// is dropped; so is a copy that would close a fully automatic cycle, and
// one that a full queue under reject-publish refuses.
func (b *Broker) deadLetter(q *queue, m *message, reason string) {
	if !q.hasDLX {
		return
	}
	keys := m.routes()
	h := deathHeaders(m, q.name, reason, b.clock.Now())
	if q.hasDLRK {
		keys = []string{q.dlrk}
		delete(h, "CC")
	}
	headers := fieldsOf(h)
	props := m.props
	props.Expiration = ""
	d := &dead{keys: keys, h: h, headers: headers, props: props, body: m.body, reason: reason}
	if !b.forward(q, d) && q.atLeastOnce {
		b.hold(q, d)
	}
}

// dead is a dead-lettered message on its way, and where it has arrived.
type dead struct {
	keys    []string
	h       map[string]any // headers, as a map for isCycle
	headers fields
	props   transport.Properties
	body    []byte
	reason  string
	settled []*queue // targets that took it (at least once: not offered again)
}

// forward offers d to the queues q's dead-letter exchange routes it to,
// except those that took it before and those it would reach in a cycle,
// and reports whether it is done: every target took it, and there was one
// (now or before). A refusal loses it, unless q holds it (at least once).
func (b *Broker) forward(q *queue, d *dead) bool {
	targets, ok := b.route(q.dlx, d.keys)
	if !ok {
		return false
	}
	done := len(d.settled) > 0
	for _, t := range targets {
		if slices.Contains(d.settled, t) || (d.reason != reasonRejected && isCycle(t.name, d.h)) {
			continue
		}
		n := &message{stored: stored{
			exchange:   q.dlx,
			routingKey: d.keys[0],
			headers:    d.headers, // shared between copies: never changed
			props:      d.props,
			body:       d.body,
		}}
		if len(d.keys) > 1 {
			n.keys = d.keys
		}
		if !b.offer(t, n, 0, false) {
			return false
		}
		d.settled = append(d.settled, t)
		done = true
	}
	return done
}

// settleTimeout is RabbitMQ's dead_letter_worker_publisher_confirm_timeout
// (its default, 3 minutes): how often a quorum queue under at-least-once
// dead-lettering offers its held dead letters again.
const settleTimeout = 3 * time.Minute

// hold keeps d in q, as RabbitMQ's at-least-once dead-letter worker keeps
// what its dead-letter exchange cannot place (missing, routing nowhere, a
// target refusing it under reject-publish), and offers it again every
// settleTimeout until placed. A held message is not ready: Depth does not
// count it (RabbitMQ lists it as messages_dlx). A cycle is held for ever.
func (b *Broker) hold(q *queue, d *dead) {
	q.held = append(q.held, d)
	if len(q.held) > 1 {
		return
	}
	var retry func()
	retry = func() {
		b.lock()
		defer b.unlock()
		if q.deleted || b.closed {
			return
		}
		q.held = slices.DeleteFunc(q.held, func(d *dead) bool { return b.forward(q, d) })
		if len(q.held) > 0 {
			b.clock.schedule(b.clock.Now().Add(settleTimeout), retry, &b.wg)
		}
	}
	b.clock.schedule(b.clock.Now().Add(settleTimeout), retry, &b.wg)
}

// deathHeaders returns m's headers with this death recorded: a new x-death
// entry at the front, or the entry for the same queue and reason counted
// up and moved to the front; x-first-death-* on the first death.
func deathHeaders(m *message, queue, reason string, now time.Time) map[string]any {
	h := m.headers.shallowMap(4) // stored values are never changed

	keys := []any{m.routingKey}
	if cc, ok := h["CC"].([]any); ok {
		for _, k := range cc {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
	}
	entry := map[string]any{
		"count":        int64(1),
		"reason":       reason,
		"queue":        queue,
		"time":         wholeSeconds(now),
		"exchange":     m.exchange,
		"routing-keys": keys,
	}
	if m.props.Expiration != "" {
		entry["original-expiration"] = m.props.Expiration
	}

	old, present := h["x-death"]
	deaths, isArray := old.([]any)
	switch {
	case !present:
		h["x-first-death-reason"] = reason
		h["x-first-death-queue"] = queue
		h["x-first-death-exchange"] = m.exchange
		h["x-death"] = []any{entry}
	case !isArray:
		h["x-death"] = []any{entry} // not an array: RabbitMQ resets it
	default:
		others := make([]any, 0, len(deaths))
		var match map[string]any
		var count int64
		for _, d := range deaths {
			t, ok := d.(map[string]any)
			if ok && t["queue"] == queue && t["reason"] == reason {
				if match == nil {
					match = t
				}
				c, _ := toInt64(t["count"])
				count += c
				continue
			}
			others = append(others, d)
		}
		if match != nil {
			entry = maps.Clone(match)
			entry["count"] = count + 1
		}
		// RabbitMQ 3.10 groups the old entries by queue and reason in a
		// fold that prepends, so those behind the new one come out
		// reversed: deaths on 1, 2, 3, 4 read 4, 2, 1, 3.
		slices.Reverse(others)
		h["x-death"] = append([]any{entry}, others...)
	}
	return h
}

// isCycle reports whether dead-lettering into queue closes a cycle that no
// client took part in: queue already appears in x-death and no death since
// (its own included) was a rejection. RabbitMQ drops such a message.
func isCycle(queue string, h map[string]any) bool {
	deaths, _ := h["x-death"].([]any)
	for i, d := range deaths {
		t, ok := d.(map[string]any)
		if !ok || t["queue"] != queue {
			continue
		}
		for _, e := range deaths[:i+1] {
			et, ok := e.(map[string]any)
			if !ok || et["reason"] == reasonRejected {
				return false
			}
		}
		return true
	}
	return false
}

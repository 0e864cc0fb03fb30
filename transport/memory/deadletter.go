package memory

import (
	"maps"
	"time"
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
	targets, ok := b.route(q.dlx, keys)
	if !ok {
		return
	}
	props := m.props
	props.Expiration = ""
	for _, t := range targets {
		if reason != reasonRejected && isCycle(t.name, h) {
			continue
		}
		n := &message{
			exchange:   q.dlx,
			routingKey: keys[0],
			headers:    headers, // shared between copies: never changed
			props:      props,
			body:       m.body,
		}
		if len(keys) > 1 {
			n.keys = keys
		}
		b.offer(t, n, 0, false) // a queue that refuses it loses it: at most once
	}
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

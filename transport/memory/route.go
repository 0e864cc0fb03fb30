package memory

import (
	"slices"
	"strings"
)

const (
	kindDirect  = "direct"
	kindFanout  = "fanout"
	kindTopic   = "topic"
	kindHeaders = "headers"
)

// exchange routes messages to the queues bound to it.
type exchange struct {
	name     string
	kind     string
	durable  bool
	args     map[string]any
	ae       string // alternate-exchange: where a message no binding matches goes
	bindings []binding
	direct   map[string][]*queue // direct exchanges: key → queues, in bind order
	all      []*queue            // fanout and headers: every bound queue, once
	// onward lists the exchange bindings, Source → Destination; with any,
	// or an alternate exchange, route walks the graph as RabbitMQ does.
	onward []binding
}

// binding is a queue binding (q) or, in onward, an exchange binding (x).
type binding struct {
	q   *queue
	key string
	x   string
}

func newExchange(name, kind string, durable bool) *exchange {
	x := &exchange{name: name, kind: kind, durable: durable}
	if kind == kindDirect {
		x.direct = make(map[string][]*queue)
	}
	return x
}

// bind adds a binding; an existing one is left as it is.
func (x *exchange) bind(q *queue, key string) {
	if slices.Contains(x.bindings, binding{q: q, key: key}) {
		return
	}
	x.bindings = append(x.bindings, binding{q: q, key: key})
	x.reindex()
}

// unbind removes every binding of q (with key, unless all) and reports
// whether one was there.
func (x *exchange) unbind(q *queue, key string, all bool) bool {
	n := len(x.bindings)
	x.bindings = slices.DeleteFunc(x.bindings, func(b binding) bool {
		return b.q == q && (all || b.key == key)
	})
	if len(x.bindings) == n {
		return false
	}
	x.reindex()
	return true
}

// reindex rebuilds the lookup tables. The slices are replaced, never
// changed in place, so a publish iterating an old one is unaffected.
func (x *exchange) reindex() {
	switch x.kind {
	case kindDirect:
		x.direct = make(map[string][]*queue, len(x.bindings))
		for _, b := range x.bindings {
			if !slices.Contains(x.direct[b.key], b.q) {
				x.direct[b.key] = append(x.direct[b.key], b.q)
			}
		}
	case kindFanout, kindHeaders:
		// A headers binding carries no arguments here (transport.Binding
		// has none), and RabbitMQ matches "all of no conditions": always.
		x.all = nil
		for _, b := range x.bindings {
			if !slices.Contains(x.all, b.q) {
				x.all = append(x.all, b.q)
			}
		}
	}
}

// route returns the queues a message published to exchange name with
// routing keys keys reaches, each once, and whether the exchange exists.
// The returned slice must not be changed.
func (b *Broker) route(name string, keys []string) ([]*queue, bool) {
	if name == "" {
		if len(keys) == 1 {
			if q := b.queues[keys[0]]; q != nil {
				return q.self, true
			}
			return nil, true
		}
		var out []*queue
		for _, k := range keys {
			if q := b.queues[k]; q != nil && !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
		return out, true
	}
	x := b.exchanges[name]
	if x == nil {
		return nil, false
	}
	if len(x.onward) == 0 && x.ae == "" {
		return x.queues(keys), true
	}
	// RabbitMQ's walk: each exchange reached once, its matching queues and
	// exchanges taken, its alternate exchange when it matched nothing.
	var out []*queue
	seen := map[string]bool{name: true}
	work := []*exchange{x}
	for len(work) > 0 {
		x := work[0]
		work = work[1:]
		qs := x.queues(keys)
		for _, q := range qs {
			if !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
		matched := len(qs) > 0
		for _, bd := range x.onward {
			if !x.matches(bd.key, keys) {
				continue
			}
			matched = true
			if y := b.exchanges[bd.x]; y != nil && !seen[bd.x] {
				seen[bd.x] = true
				work = append(work, y)
			}
		}
		if !matched && x.ae != "" {
			if y := b.exchanges[x.ae]; y != nil && !seen[x.ae] {
				seen[x.ae] = true
				work = append(work, y)
			}
		}
	}
	return out, true
}

// matches reports whether a binding with key takes a message with keys.
func (x *exchange) matches(key string, keys []string) bool {
	switch x.kind {
	case kindDirect:
		return slices.Contains(keys, key)
	case kindTopic:
		return slices.ContainsFunc(keys, func(k string) bool { return topicMatch(key, k) })
	default:
		return true
	}
}

// queues returns the queues x's queue bindings take a message with keys
// to, each once. The returned slice must not be changed.
func (x *exchange) queues(keys []string) []*queue {
	switch x.kind {
	case kindDirect:
		if len(keys) == 1 {
			return x.direct[keys[0]]
		}
		var out []*queue
		for _, k := range keys {
			for _, q := range x.direct[k] {
				if !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
		return out
	case kindTopic:
		var out []*queue
		for _, bd := range x.bindings {
			if slices.Contains(out, bd.q) {
				continue
			}
			for _, k := range keys {
				if topicMatch(bd.key, k) {
					out = append(out, bd.q)
					break
				}
			}
		}
		return out
	default:
		return x.all
	}
}

// topicMatch reports whether routing key key matches binding pattern
// pattern: words separated by dots, * standing for one word and # for zero
// or more. An empty key or pattern is no words at all, as RabbitMQ reads
// it: "" matches "#" and "", never "*".
func topicMatch(pattern, key string) bool {
	return matchWords(topicWords(pattern), topicWords(key))
}

func topicWords(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

func matchWords(p, k []string) bool {
	for len(p) > 0 {
		switch p[0] {
		case "#":
			for i := 0; i <= len(k); i++ {
				if matchWords(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(k) == 0 {
				return false
			}
		default:
			if len(k) == 0 || k[0] != p[0] {
				return false
			}
		}
		p, k = p[1:], k[1:]
	}
	return len(k) == 0
}

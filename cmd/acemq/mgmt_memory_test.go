package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport/memory"
)

// memoryManagement is the management API of a memory broker, for the
// delay queues and the queues named: GET /api/queues/{vhost} and GET
// /api/exchanges/{vhost}, answered as RabbitMQ 3.10.8 does (one page; a
// quorum queue's messages counting its ready, unacked and
// dead-lettering ones; messages_dlx only on quorum queues). A queue named
// in unsampled is listed without its counts, as the API lists a queue
// declared since its last sample.
type memoryManagement struct {
	*httptest.Server
	b         *memory.Broker
	mu        sync.Mutex
	unsampled []string
}

func newMemoryManagement(t *testing.T, b *memory.Broker, vhost string, queues ...string) *memoryManagement {
	t.Helper()
	m := &memoryManagement{b: b}
	names := append(delay.Queues(), queues...)
	prefix := "/api/queues/" + strings.ReplaceAll(vhost, "/", "%2F")
	exchanges := "/api/exchanges/" + strings.ReplaceAll(vhost, "/", "%2F")
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var items []map[string]any
		switch r.URL.EscapedPath() {
		case prefix:
			for _, n := range names {
				if q := m.queue(n); q != nil {
					items = append(items, q)
				}
			}
		case exchanges:
			for _, n := range append(delay.Exchanges(), "", "amq.direct") {
				if _, ok := b.Exchange(n); ok || n == "" {
					items = append(items, map[string]any{"name": n, "type": "topic"})
				}
			}
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "page": 1, "page_count": 1})
	}))
	t.Cleanup(m.Close)
	return m
}

// unsample lists queue without counts until the next call.
func (m *memoryManagement) unsample(queues ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsampled = queues
}

func (m *memoryManagement) queue(name string) map[string]any {
	d, ok := m.b.Queue(name)
	if !ok {
		return nil
	}
	typ := "classic"
	if d.Args["x-queue-type"] == "quorum" {
		typ = "quorum"
	}
	q := map[string]any{"name": name, "type": typ, "state": "running"}
	m.mu.Lock()
	unsampled := slices.Contains(m.unsampled, name)
	m.mu.Unlock()
	if unsampled {
		return q
	}
	ready, unacked, held := m.b.Depth(name), m.b.Unacked(name), m.b.DeadLettering(name)
	q["messages"], q["messages_ready"], q["messages_unacknowledged"], q["consumers"] = ready+unacked+held, ready, unacked, 0
	if typ == "quorum" {
		q["messages_dlx"] = held
	}
	return q
}

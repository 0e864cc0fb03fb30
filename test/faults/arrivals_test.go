package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
)

// arrival is one kind of delivery: an attempt, and where it came from.
type arrival struct {
	attempt int
	via     string
}

// arrivals counts deliveries by attempt and by where they came from.
type arrivals struct {
	mu sync.Mutex
	n  map[arrival]int
}

func (a *arrivals) record(h acemq.Handler) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		k := arrival{attempt: m.Attempt(), via: viaOf(m.Header("x-death"))}
		a.mu.Lock()
		a.n[k]++
		a.mu.Unlock()
		return h.ServeMessage(ctx, m)
	})
}

// viaOf reads where a message last waited from its x-death header.
func viaOf(deaths any) string {
	ds, _ := deaths.([]any)
	if len(ds) == 0 {
		return viaDirect
	}
	var queue string
	switch d := ds[0].(type) {
	case map[string]any:
		queue, _ = d["queue"].(string)
	case amqp.Table:
		queue, _ = d["queue"].(string)
	}
	switch {
	case strings.HasPrefix(queue, delay.Prefix):
		return viaDelays
	case strings.Contains(queue, ".retry."):
		return viaRung
	}
	return "x-death from " + queue
}

func (a *arrivals) count(match func(arrival) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for k, c := range a.n {
		if match(k) {
			n += c
		}
	}
	return n
}

// String reads "attempt 1 via delay queues: 400, attempt 2 ...".
func (a *arrivals) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]arrival, 0, len(a.n))
	for k := range a.n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y arrival) int {
		if x.attempt != y.attempt {
			return x.attempt - y.attempt
		}
		return strings.Compare(x.via, y.via)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("attempt %d via %s: %d", k.attempt, k.via, a.n[k])
	}
	return strings.Join(parts, ", ")
}

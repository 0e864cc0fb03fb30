package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// fakeManagement answers as RabbitMQ's management API would for vhost "/":
// each queue's detail (GET /api/queues/%2F/NAME), the list of them, and the
// overview with version.
// Without listing, the list answers 503, and status falls back to passive
// declares.
func fakeManagement(t *testing.T, version string, listing bool, queues map[string]map[string]any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "guest" || p != "guest" {
			http.Error(rw, "no", http.StatusUnauthorized)
			return
		}
		answer := func(v any) {
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(v)
		}
		path := r.URL.EscapedPath()
		switch {
		case path == "/api/overview":
			answer(map[string]any{"rabbitmq_version": version, "product_name": "RabbitMQ"})
		case path == "/api/queues/%2F" && !listing:
			http.Error(rw, "not listing", http.StatusServiceUnavailable)
		case path == "/api/queues/%2F":
			var items []map[string]any
			for name, q := range queues {
				item := map[string]any{"name": name, "type": "classic", "state": "running"}
				for k, v := range q {
					item[k] = v
				}
				items = append(items, item)
			}
			answer(map[string]any{"items": items, "page": 1, "page_count": 1})
		case strings.HasPrefix(path, "/api/queues/%2F/"):
			q, ok := queues[strings.TrimPrefix(r.URL.Path, "/api/queues///")]
			if !ok {
				http.Error(rw, `{"error":"Object Not Found","reason":"Not Found"}`, http.StatusNotFound)
				return
			}
			answer(q)
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestReadKind(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"orders.dlq":                   kindDLQ,
		"orders.parked":                kindParked,
		"orders.dlq.archive":           kindArchive,
		"purged.archive":               kindArchive,
		"orders":                       kindWork,
		".dlq":                         kindWork,
		".archive":                     kindWork,
		"orders.retry.40s":             kindRung,
		"acemq.delay.v1.07":            kindDelayLevel,
		"acemq.delay.v1.undeliverable": kindUndeliverable,
		"orders.dlq.x":                 kindWork,
	} {
		if got := readKind(name); got != want {
			t.Errorf("readKind(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestReadCost: what the management API says of each queue turns into the
// limit a read counts against, and where it comes from.
func TestReadCost(t *testing.T) {
	t.Parallel()
	queues := map[string]map[string]any{
		"orders.dlq":  {"type": "classic", "arguments": map[string]any{}, "effective_policy_definition": []any{}},
		"orders":      {"type": "quorum", "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": "acemq.dlx"}, "effective_policy_definition": map[string]any{}},
		"pay":         {"type": "quorum", "arguments": map[string]any{"x-delivery-limit": 10}, "policy": "cap", "effective_policy_definition": map[string]any{"delivery-limit": 5, "dead-letter-exchange": "pol.dlx"}},
		"plain.q":     {"type": "quorum", "arguments": map[string]any{}, "effective_policy_definition": map[string]any{}},
		"unlimited.q": {"type": "quorum", "arguments": map[string]any{"x-delivery-limit": -1}, "effective_policy_definition": map[string]any{}},
		"fresh.dlq":   {"type": "classic", "arguments": map[string]any{}}, // not sampled yet: no policy fields
		"pay.parked":  {"type": "quorum", "arguments": map[string]any{}, "operator_policy": "ops", "effective_policy_definition": map[string]any{"delivery-limit": 3}},
	}
	b := memory.New()
	tr := b.Connect()
	t.Cleanup(func() { tr.Close() })
	ctx := context.Background()
	var decl transport.Topology
	for name := range queues {
		decl.Queues = append(decl.Queues, transport.Queue{Name: name, Durable: true})
	}
	if err := tr.Declare(ctx, decl); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"3.10.8", "4.0.5"} {
		srv := fakeManagement(t, version, true, queues)
		mc, err := newMgmtClient(srv.URL, "amqp://guest:guest@localhost/", nil)
		if err != nil {
			t.Fatal(err)
		}
		a := &app{ctx: ctx, url: "amqp://guest:guest@localhost/", getenv: func(string) string { return "" }, now: time.Now, stdout: io.Discard, stderr: io.Discard}
		v4 := version[0] == '4'
		for _, c := range []struct {
			queue, kind string
			limit       int
			from, dlx   string
			free        bool
			says        string
		}{
			{"orders.dlq", kindDLQ, 0, "", "", true, "orders.dlq is a dead-letter queue (classic); no delivery limit: a read marks each message redelivered and costs nothing more"},
			{"orders", kindWork, 2, "its x-delivery-limit argument", "acemq.dlx", false, "a read counts one delivery of every message it reads against it, and a message past the limit is dead-lettered to exchange acemq.dlx"},
			{"pay", kindWork, 5, "policy cap", "pol.dlx", false, "delivery limit of 5 (policy cap)"},
			{"pay.parked", kindParked, 3, "policy operator policy ops", "", false, "dropped by the broker (the queue has no dead-letter exchange)"},
			{"unlimited.q", kindWork, 0, "its x-delivery-limit argument says unlimited", "", false, "no delivery limit (its x-delivery-limit argument says unlimited)"},
		} {
			cost, err := a.readCost(ctx, tr, mc, c.queue)
			if err != nil {
				t.Fatalf("%s on %s: %v", c.queue, version, err)
			}
			if c.queue == "pay.parked" {
				c.from = "policy ops"
			}
			if cost.Kind != c.kind || cost.Limit != c.limit || cost.LimitFrom != c.from || cost.DeadLetterExchange != c.dlx || cost.Free() != c.free || !cost.Known() ||
				!strings.Contains(cost.String(), c.says) {
				t.Errorf("%s on %s: %+v\n%s", c.queue, version, cost, cost)
			}
		}
		// A quorum queue that sets no limit: none on 3.x, 20 on 4.
		cost, err := a.readCost(ctx, tr, mc, "plain.q")
		if err != nil {
			t.Fatal(err)
		}
		// Not sampled yet: its policies are not known, so neither is its cost.
		short, cancel := context.WithTimeout(ctx, time.Second)
		cost, err = a.readCost(short, tr, mc, "fresh.dlq")
		cancel()
		if err == nil || cost.Known() || !strings.Contains(cost.Unknown, "has not sampled fresh.dlq yet") {
			t.Errorf("fresh.dlq: %v %+v", err, cost)
		}
		cost, err = a.readCost(ctx, tr, mc, "plain.q")
		if err != nil {
			t.Fatal(err)
		}
		if v4 && (cost.Limit != 20 || !strings.Contains(cost.LimitFrom, "RabbitMQ 4's default")) || !v4 && cost.Limit != 0 {
			t.Errorf("plain.q on %s: %+v", version, cost)
		}
	}

	// Not there: ErrNotFound, from the transport.
	a := &app{ctx: ctx, url: "amqp://guest:guest@localhost/", getenv: func(string) string { return "" }}
	if _, err := a.readCost(ctx, tr, nil, "nope.dlq"); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("a missing queue: %v", err)
	}
	// The management API is not there: the kind is known, the limit is
	// not, and the sentence says so.
	down, err := newMgmtClient("http://127.0.0.1:1", "amqp://guest:guest@localhost/", nil)
	if err != nil {
		t.Fatal(err)
	}
	cost, err := a.readCost(ctx, tr, down, "orders.dlq")
	if err == nil || cost.Known() || cost.Free() || cost.Kind != kindDLQ || !strings.Contains(cost.String(), "whether a read counts against a delivery limit is not known (the management plugin is not reachable") {
		t.Errorf("no management API: %v\n%+v\n%s", err, cost, cost)
	}
}

// TestReadCostRedacts: a management URL's password never reaches what
// readCost says.
func TestReadCostRedacts(t *testing.T) {
	t.Parallel()
	b := memory.New()
	tr := b.Connect()
	t.Cleanup(func() { tr.Close() })
	if err := tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "orders.dlq", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	a := &app{ctx: context.Background(), url: "amqp://guest:s3cr3t-pw@localhost/", getenv: func(string) string { return "" },
		secrets: secretArgs([]string{"--management", "http://ops:m4nag3-pw@127.0.0.1:1"})}
	a.stderr = io.Discard
	fs, _, _ := a.flags("test", "", "", true)
	mc, err := a.managementFor(fs, "http://ops:m4nag3-pw@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cost, _ := a.readCost(context.Background(), tr, mc, "orders.dlq")
	if s := cost.String(); strings.Contains(s, "s3cr3t-pw") || strings.Contains(s, "m4nag3-pw") || cost.Known() {
		t.Errorf("%s", s)
	}
}

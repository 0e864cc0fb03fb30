package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/escape"
)

// breakerNow is the clock the breaker tests print with: 12 minutes after
// the breakers in them opened.
var (
	breakerSince = time.Date(2026, 12, 2, 9, 1, 2, 123e6, time.UTC)
	breakerUntil = breakerSince.Add(12*time.Minute + 48*time.Second)
	breakerNow   = breakerSince.Add(12 * time.Minute)
)

// markerItem is a queue of GET /api/queues/{vhost} as RabbitMQ 3.10 lists
// a marker: its arguments (JSON text) and exclusive, no counts yet.
func markerItem(name, args string, exclusive bool) string {
	return fmt.Sprintf(`{"name":%q,"type":"classic","state":"running","durable":false,"auto_delete":false,"exclusive":%t,"arguments":%s}`, name, exclusive, args)
}

// contractArgs are the arguments of a marker as the wire contract writes
// them (x-max-length and x-overflow included, which status does not read).
func contractArgs(queue, state, instance, why string, since time.Time, until *time.Time) string {
	args := map[string]any{
		argBreakerQueue: queue, argBreakerState: state, argBreakerSince: since.UnixMilli(), argBreakerWhy: why, argBreakerInstance: instance,
		"x-max-length": 0, "x-overflow": "reject-publish", "x-queue-type": "classic",
	}
	if until != nil {
		args[argBreakerUntil] = until.UnixMilli()
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// statsOf is the listing of items (JSON objects) as status reads it.
func statsOf(t *testing.T, items ...string) []queueStat {
	t.Helper()
	var qs []mgmtQueue
	if err := json.Unmarshal([]byte("["+strings.Join(items, ",")+"]"), &qs); err != nil {
		t.Fatal(err)
	}
	stats := make([]queueStat, 0, len(qs))
	for _, q := range qs {
		stats = append(stats, fromManagement(q))
	}
	return stats
}

// family is orders with its .dlq and .parked, and audit, a queue that is
// not acemq's, as the management API lists them.
var family = []string{
	`{"name":"orders","type":"quorum","state":"running","messages":40,"messages_ready":40,"messages_unacknowledged":0,"consumers":0,"exclusive":false,"arguments":{"x-queue-type":"quorum"}}`,
	`{"name":"orders.dlq","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0,"exclusive":false,"arguments":{}}`,
	`{"name":"orders.parked","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0,"exclusive":false,"arguments":{}}`,
	`{"name":"audit","type":"classic","state":"running","messages":9,"messages_ready":9,"messages_unacknowledged":0,"consumers":1,"exclusive":false,"arguments":[]}`,
}

func TestBreakerMarkersGroupIntoServices(t *testing.T) {
	t.Parallel()
	until := breakerUntil
	open := markerItem("orders.breaker.web-3-48121-9f2c", contractArgs("orders", "open", "web-3-48121-9f2c", "12 of the last 20 counted failures; the last: warehouse: 503", breakerSince, &until), true)
	halfOpen := markerItem("orders.breaker.web-1-100-aaaa", contractArgs("orders", "half-open", "web-1-100-aaaa", "12 of the last 20 counted failures", breakerSince, nil), true)
	type want struct {
		queue     string   // the service the breaker is on
		instances []string // its breakers, in order
		rows      []string // the service's queue rows, "!" for a missing one
		other     []string
		notes     []string // what each breaker's Note holds, "" for none
	}
	for _, c := range []struct {
		name  string
		items []string
		want  want
	}{
		{"open", []string{open}, want{queue: "orders", instances: []string{"web-3-48121-9f2c"},
			rows: []string{"orders", "orders.dlq", "orders.parked"}, other: []string{"audit"}, notes: []string{""}}},
		{"two instances on one queue, by instance", []string{open, halfOpen}, want{queue: "orders", instances: []string{"web-1-100-aaaa", "web-3-48121-9f2c"},
			rows: []string{"orders", "orders.dlq", "orders.parked"}, other: []string{"audit"}, notes: []string{"", ""}}},
		{"a queue not otherwise listed gets its service, its family missing",
			[]string{markerItem("shipping.breaker.w-1", contractArgs("shipping", "open", "w-1", "down", breakerSince, &until), true)},
			want{queue: "shipping", instances: []string{"w-1"}, rows: []string{"!shipping", "!shipping.dlq", "!shipping.parked"}, other: []string{"audit"}, notes: []string{""}}},
		{"a queue with no family becomes a service",
			[]string{markerItem("audit.breaker.w-1", contractArgs("audit", "open", "w-1", "down", breakerSince, &until), true)},
			want{queue: "audit", instances: []string{"w-1"}, rows: []string{"audit"}, notes: []string{""}}},
		{"the queue comes from the argument, not the name (a cut name)",
			[]string{markerItem("ord-cut-5d41402abc4b2a76", contractArgs("orders", "open", "w-2", "down", breakerSince, &until), true)},
			want{queue: "orders", instances: []string{"w-2"}, rows: []string{"orders", "orders.dlq", "orders.parked"}, other: []string{"audit"}, notes: []string{""}}},
		{"broken arguments: what can be read, and a note",
			[]string{markerItem("orders.breaker.w-9", `{"x-acemq-breaker-state":7,"x-acemq-breaker-since":"yesterday","x-acemq-breaker-why":["a"]}`, true)},
			want{queue: "orders", instances: []string{""}, rows: []string{"orders", "orders.dlq", "orders.parked"}, other: []string{"audit"},
				notes: []string{"x-acemq-breaker-queue is missing: its queue is taken from its name, which may be cut; x-acemq-breaker-state is not a string; " +
					"x-acemq-breaker-since is not an integer of Unix milliseconds; x-acemq-breaker-until is missing; x-acemq-breaker-why is not a string; x-acemq-breaker-instance is missing"}}},
		{"a foreign state, and not exclusive",
			[]string{markerItem("orders.breaker.w-5", `{"x-acemq-breaker-queue":"orders","x-acemq-breaker-state":"tripped","x-acemq-breaker-instance":"w-5","x-acemq-breaker-since":0}`, false)},
			want{queue: "orders", instances: []string{"w-5"}, rows: []string{"orders", "orders.dlq", "orders.parked"}, other: []string{"audit"},
				notes: []string{`x-acemq-breaker-state is "tripped", neither open nor half-open; x-acemq-breaker-since is 0, no time; x-acemq-breaker-until is missing; ` +
					"not exclusive: it outlives the connection that declared it and may be stale"}}},
		{"only a marker's argument, no queue and no Q.breaker name: under its own name",
			[]string{markerItem("stray", `{"x-acemq-breaker-state":"open"}`, true)},
			want{queue: "stray", instances: []string{""}, rows: []string{"!stray", "!stray.dlq", "!stray.parked"}, other: []string{"audit"},
				notes: []string{"x-acemq-breaker-queue is missing: and its name is not Q.breaker.<instance>: shown under its own name; x-acemq-breaker-since is missing; " +
					"x-acemq-breaker-until is missing; x-acemq-breaker-instance is missing"}}},
		{"named x.breaker.y without the arguments: an ordinary queue",
			[]string{
				`{"name":"x.breaker.y","type":"classic","state":"running","messages":1,"messages_ready":1,"messages_unacknowledged":0,"consumers":0,"exclusive":true,"arguments":{"x-max-length":0}}`,
				`{"name":"orders.breaker.old","type":"classic","state":"running","exclusive":false,"arguments":[]}`,
			},
			want{other: []string{"audit", "orders.breaker.old", "x.breaker.y"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			services, _, other := group(statsOf(t, append(slices.Clone(family), c.items...)...), nil)
			if !slices.Equal(other, c.want.other) {
				t.Errorf("other %v, want %v", other, c.want.other)
			}
			var got *service
			for i, s := range services {
				for _, q := range s.Queues {
					if q.Role == roleBreaker || strings.Contains(q.Name, "breaker") {
						t.Errorf("a marker shown as a queue row of %s: %+v", s.Queue, q)
					}
				}
				if s.Queue == c.want.queue {
					got = &services[i]
				} else if len(s.Breakers) > 0 {
					t.Errorf("breakers on %s: %+v", s.Queue, s.Breakers)
				}
			}
			if c.want.queue == "" {
				return
			}
			if got == nil {
				t.Fatalf("no service %s in %+v", c.want.queue, services)
			}
			var rows, instances, notes []string
			for _, q := range got.Queues {
				rows = append(rows, map[bool]string{true: "!"}[q.Missing]+q.Name)
			}
			for _, m := range got.Breakers {
				instances, notes = append(instances, m.Instance), append(notes, m.Note)
			}
			if !slices.Equal(rows, c.want.rows) || !slices.Equal(instances, c.want.instances) || !slices.Equal(notes, c.want.notes) {
				t.Errorf("%s: rows %v, breakers %v, notes %q\nwant %v, %v, %q", got.Queue, rows, instances, notes, c.want.rows, c.want.instances, c.want.notes)
			}
		})
	}
}

func TestBreakerMarkReadsTheContractsArguments(t *testing.T) {
	t.Parallel()
	until := breakerUntil
	for _, c := range []struct {
		name string
		item string
		want breakerMark
	}{
		{"open", markerItem("orders.breaker.web-3", contractArgs("orders", "open", "web-3", "12 of the last 20 counted failures", breakerSince, &until), true),
			breakerMark{Instance: "web-3", State: "open", Since: &breakerSince, Until: &until, Why: "12 of the last 20 counted failures", Marker: "orders.breaker.web-3", queue: "orders"}},
		{"half-open has no until, and one written is not read", markerItem("orders.breaker.web-3", contractArgs("orders", "half-open", "web-3", "", breakerSince, &until), true),
			breakerMark{Instance: "web-3", State: "half-open", Since: &breakerSince, Marker: "orders.breaker.web-3", queue: "orders"}},
		{"a why past 1 024 bytes is cut on a rune", markerItem("orders.breaker.web-3", contractArgs("orders", "open", "web-3", "a"+strings.Repeat("é", 600), breakerSince, &until), true),
			breakerMark{Instance: "web-3", State: "open", Since: &breakerSince, Until: &until, Why: "a" + strings.Repeat("é", 511) + "…", Marker: "orders.breaker.web-3", queue: "orders",
				Note: "x-acemq-breaker-why is 1201 bytes, past the contract's 1024: cut"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := statsOf(t, c.item)[0]
			if s.breaker == nil || s.Role != roleBreaker {
				t.Fatalf("not read as a marker: %+v", s)
			}
			got := *s.breaker
			if got.Instance != c.want.Instance || got.State != c.want.State || !sameTime(got.Since, c.want.Since) || !sameTime(got.Until, c.want.Until) ||
				got.Why != c.want.Why || got.Marker != c.want.Marker || got.queue != c.want.queue || got.Note != c.want.Note {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// breakerOut is status's output for orders with an open breaker whose why
// is hostile (an escape sequence that clears the screen, a newline that
// forges a row, the broker URL's password) and a half-open one.
func breakerOut(t *testing.T, why string) statusOut {
	t.Helper()
	until := breakerUntil
	items := append(slices.Clone(family),
		markerItem("orders.breaker.web-3", contractArgs("orders", "open", "web-3", why, breakerSince, &until), true),
		markerItem("orders.breaker.web-1", contractArgs("orders", "half-open", "web-1", "12 of the last 20 counted failures", breakerSince.Add(-26*time.Hour), nil), true))
	var qs []mgmtQueue
	if err := json.Unmarshal([]byte("["+strings.Join(items, ",")+"]"), &qs); err != nil {
		t.Fatal(err)
	}
	a := &app{url: "amqp://ops:s3cret@rabbit.internal/prod", now: func() time.Time { return breakerNow }}
	out := statusOut{Vhost: "prod", Source: "management API", Management: "http://rabbit.internal:15672"}
	out.Services, out.Delays, out.Other = a.fromListing(qs, nil)
	return out
}

const hostileWhy = "warehouse: dial amqp://ops:s3cret@rabbit.internal: refused\x1b[2J\norders.dlq  999  999  0  0  0  -  -  running"

func TestBreakerPrintedEscapedAndRedacted(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	a := &app{stdout: &stdout, now: func() time.Time { return breakerNow }}
	a.printStatus(breakerOut(t, hostileWhy), false)
	want := `vhost prod, from the management API at http://rabbit.internal:15672: 1 service, 1 other queue not acemq's, 2 circuit breakers not closed
QUEUE            MESSAGES  READY  UNACKED  DEAD-LETTERING  CONSUMERS  IN/S  OUT/S  STATE
orders           40        40     0        -               0          -     -      running
  orders.dlq     0         0      0        0               0          -     -      running
  orders.parked  0         0      0        0               0          -     -      running
  breaker web-1                                                                    half-open since 2026-12-01 07:01:02Z (26h12m ago), probing one message at a time: 12 of the last 20 counted failures
  breaker web-3                                                                    open since 09:01:02Z (12m ago), probes at 09:13:50Z (in 48s): warehouse: dial amqp://ops:xxxxx@rabbit.internal: refused\x1b[2J\norders.dlq  999  999  0  0  0  -  -  running

A circuit breaker is not closed on orders: the handlers' dependency is failing, so their consumers stopped taking messages, which wait ready in the queue and spend no attempt; nothing to fix in the broker.
`
	if got := stdout.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	assertSafe(t, "status", stdout.String())
}

func TestBreakerJSONShape(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	a := &app{stdout: &stdout, now: func() time.Time { return breakerNow }}
	a.printStatus(breakerOut(t, hostileWhy), true)
	var raw struct {
		Services []map[string]json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil || len(raw.Services) != 1 {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	var breakers []map[string]any
	if err := json.Unmarshal(raw.Services[0]["breakers"], &breakers); err != nil || len(breakers) != 2 {
		t.Fatalf("breakers: %v\n%s", err, stdout.String())
	}
	want := []map[string]any{
		{"instance": "web-1", "state": "half-open", "since": "2026-12-01T07:01:02.123Z", "why": "12 of the last 20 counted failures", "marker": "orders.breaker.web-1"},
		{"instance": "web-3", "state": "open", "since": "2026-12-02T09:01:02.123Z", "until": "2026-12-02T09:13:50.123Z",
			"why": strings.Replace(hostileWhy, "s3cret", "xxxxx", 1), "marker": "orders.breaker.web-3"},
	}
	for i, w := range want {
		if fmt.Sprint(breakers[i]) != fmt.Sprint(w) {
			t.Errorf("breaker %d:\n got %v\nwant %v", i, breakers[i], w)
		}
	}
	assertSafe(t, "status --json", stdout.String())
	// A service without a breaker has no breakers field.
	var none bytes.Buffer
	a.stdout = &none
	a.printStatus(statusOut{Services: []service{{Queue: "q", Queues: []queueStat{{Name: "q", Role: roleWork}}}}}, true)
	if strings.Contains(none.String(), "breakers") {
		t.Errorf("%s", none.String())
	}
}

// TestBreakerMarkersFollowQueue: with --queue, only the services named
// are shown, their breakers with them, and a named queue the vhost has
// only a marker of is its service, not missing twice.
func TestBreakerMarkersFollowQueue(t *testing.T) {
	t.Parallel()
	until := breakerUntil
	stats := statsOf(t, append(slices.Clone(family),
		markerItem("orders.breaker.w-1", contractArgs("orders", "open", "w-1", "down", breakerSince, &until), true),
		markerItem("shipping.breaker.w-1", contractArgs("shipping", "open", "w-1", "down", breakerSince, &until), true))...)
	for _, c := range []struct {
		only []string
		want []string // services, each with its breakers' count
	}{
		{[]string{"orders.dlq"}, []string{"orders 1"}},
		{[]string{"shipping"}, []string{"shipping 1"}},
		{[]string{"shipping", "billing"}, []string{"billing 0", "shipping 1"}},
		{nil, []string{"orders 1", "shipping 1"}},
	} {
		services, _, _ := group(stats, c.only)
		services = withMissing(services, c.only)
		var got []string
		for _, s := range services {
			got = append(got, fmt.Sprintf("%s %d", s.Queue, len(s.Breakers)))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("--queue %v: %v, want %v", c.only, got, c.want)
		}
	}
}

// TestStatusShowsBreakersFromTheManagementAPI: acemq status itself, on a
// management API that lists a marker: the breaker is on its service, its
// why redacted of the command line's password, in the JSON and the table.
func TestStatusShowsBreakersFromTheManagementAPI(t *testing.T) {
	t.Parallel()
	until := breakerUntil
	canned := "[" + strings.Join(append(slices.Clone(family),
		markerItem("orders.breaker.w-1", contractArgs("orders", "open", "w-1", "db: dial postgres://ops:pw@db.internal: refused", breakerSince, &until), true)), ",") + "]"
	srv := managementAPI(t, "prod", canned)
	code, out, errOut := cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL, "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	if len(got.Services) != 1 || len(got.Services[0].Breakers) != 1 || got.Services[0].Breakers[0].Why != "db: dial postgres://ops:xxxxx@db.internal: refused" ||
		!got.Services[0].Breakers[0].Until.Equal(breakerUntil) || strings.Contains(out, "pw@") {
		t.Errorf("%s", out)
	}
	code, out, _ = cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL)
	if code != 0 || !strings.Contains(out, "1 circuit breaker not closed\n") || !strings.Contains(out, "\n  breaker w-1  ") ||
		!strings.Contains(out, " open since ") || !strings.Contains(out, "09:01:02Z (") || strings.Contains(out, "pw@") {
		t.Errorf("%d\n%s", code, out)
	}
}

// FuzzBreakerMarker: whatever arguments a queue has, reading it as a
// marker never panics, and what the table and the page print of it is
// safe for a terminal.
func FuzzBreakerMarker(f *testing.F) {
	until := breakerUntil
	f.Add("orders.breaker.w-1", contractArgs("orders", "open", "w-1", "down", breakerSince, &until), true)
	f.Add("x.breaker.y", `{"x-acemq-breaker-state":null,"x-acemq-breaker-since":-1,"x-acemq-breaker-until":1e400}`, false)
	f.Add("q", `{"x-acemq-breaker-why":"\u001b[2J\n","x-acemq-breaker-instance":"\u202e"}`, true)
	f.Add("q", `[]`, true)
	f.Fuzz(func(t *testing.T, name, args string, exclusive bool) {
		q := mgmtQueue{Name: name, Arguments: json.RawMessage(args), Exclusive: exclusive}
		m, ok := markerOf(q)
		if !ok {
			return
		}
		if m.queue == "" {
			t.Errorf("a marker of no queue: %+v", m)
		}
		for _, s := range []string{breakerText(breakerNow, m), breakerWhen(breakerNow, m)} {
			if !escape.IsSafe(s) {
				t.Errorf("unsafe: %q", s)
			}
		}
	})
}

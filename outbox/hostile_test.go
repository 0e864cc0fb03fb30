package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// hostile is a row that another writer (hand-written SQL, another
// library, a migration) could leave in the table, inserted with raw SQL
// between rows that Write wrote.
type hostile struct {
	name string
	// set gives columns as SQL expressions over a good row's defaults;
	// {queue} stands for the test's queue.
	set map[string]string
	// bad is what the row's last_error must say; empty for a row the
	// relay must publish.
	bad string
	// drift is SQL run on the table ({table}) before the row goes in: a
	// schema that is no longer what CreateTableSQL made.
	drift string
	// check looks at the delivery of a row that is published.
	check func(t *testing.T, id string, d transport.Delivery)
}

// maxBody is the hostile tests' WithMaxBodySize: small, so that a body
// over it is cheap to write.
const maxBody = 64 << 10

// dropNotNull makes every column but seq nullable.
const dropNotNull = `ALTER TABLE {table} ALTER COLUMN id DROP NOT NULL, ALTER COLUMN exchange DROP NOT NULL,
	ALTER COLUMN routing_key DROP NOT NULL, ALTER COLUMN content_type DROP NOT NULL,
	ALTER COLUMN correlation_id DROP NOT NULL, ALTER COLUMN body DROP NOT NULL,
	ALTER COLUMN created_at DROP NOT NULL, ALTER COLUMN attempts DROP NOT NULL`

// noUserHeaders checks that a delivery carries the contract's headers
// and nothing else.
func noUserHeaders(t *testing.T, id string, d transport.Delivery) {
	t.Helper()
	for k := range d.Headers {
		if !strings.HasPrefix(k, "x-acemq-") {
			t.Errorf("header %s = %v on a row with no headers", k, d.Headers[k])
		}
	}
	if header(d, acemq.HeaderID) != id || d.Headers[acemq.HeaderAttempt] != int64(1) {
		t.Errorf("x-acemq-id %q attempt %v, want %q attempt 1", header(d, acemq.HeaderID), d.Headers[acemq.HeaderAttempt], id)
	}
}

var hostileRows = []hostile{
	// The reported case: what a nil map marshals to.
	{name: "headers JSON null", set: map[string]string{"headers": `'null'::jsonb`}, check: noUserHeaders},
	{name: "headers SQL NULL", set: map[string]string{"headers": `NULL`}, check: noUserHeaders},
	{name: "headers empty object", set: map[string]string{"headers": `'{}'`}, check: noUserHeaders},
	{name: "headers an array", set: map[string]string{"headers": `'[1,2]'`}, bad: "the headers column holds a JSON array, not an object"},
	{name: "headers a string", set: map[string]string{"headers": `'"x"'`}, bad: "the headers column holds a JSON string, not an object"},
	{name: "headers a number", set: map[string]string{"headers": `'42'`}, bad: "the headers column holds a JSON number, not an object"},
	{name: "headers a boolean", set: map[string]string{"headers": `'true'`}, bad: "the headers column holds a JSON boolean, not an object"},
	{name: "headers nested 10001 deep", set: map[string]string{"headers": `('{"deep": ' || repeat('[', 10001) || repeat(']', 10001) || '}')::jsonb`},
		bad: "the headers column cannot be read as JSON"},
	// Too large for a frame: the transport refuses it as it measures it.
	{name: "headers of 200 KB", set: map[string]string{"headers": `jsonb_build_object('big', repeat('x', 200000))`}, bad: "headers is"},
	// Too large to read: refused unread (hex does not compress).
	{name: "headers of 2 MB", set: map[string]string{"headers": `(SELECT jsonb_build_object('big', string_agg(md5(i::text), '')) FROM generate_series(1, 65536) i)`},
		bad: "the headers column takes"},
	{name: "headers of 2 MB that compress", set: map[string]string{"headers": `jsonb_build_object('big', repeat(md5('x'), 65536))`}, bad: "headers is"},
	{name: "header number no AMQP type holds", set: map[string]string{"headers": `'{"n": 1e400}'`}, bad: `header "n"`},
	{name: "nested header number no AMQP type holds", set: map[string]string{"headers": `'{"m": {"k": [1, -1e400]}}'`}, bad: `header "m"`},
	{name: "header name over 255 bytes", set: map[string]string{"headers": `jsonb_build_object(repeat('k', 300), 1)`}, bad: "header name"},
	{name: "contract headers spoofed", set: map[string]string{"headers": `'{"x-acemq-id": "spoof", "x-acemq-attempt": 9, "x-acemq-error": "stale", "tenant": "acme"}'`},
		check: func(t *testing.T, id string, d transport.Delivery) {
			if header(d, acemq.HeaderID) != id || d.Headers[acemq.HeaderAttempt] != int64(1) || d.Headers["x-acemq-error"] != nil || header(d, "tenant") != "acme" {
				t.Errorf("headers %v; want the row's id, attempt 1, no x-acemq-error, tenant kept", d.Headers)
			}
		}},
	// CC and BCC are the broker's to act on: a new message drops them
	// (wire.New), whatever their type, and goes out without them.
	{name: "CC header not an array", set: map[string]string{"headers": `'{"CC": "audit", "tenant": "acme"}'`},
		check: func(t *testing.T, _ string, d transport.Delivery) {
			if _, ok := d.Headers["CC"]; ok || header(d, "tenant") != "acme" {
				t.Errorf("headers %v; want CC dropped and tenant kept", d.Headers)
			}
		}},
	{name: "missing exchange", set: map[string]string{"exchange": `'no.such.exchange'`}, bad: "not found"},
	{name: "default exchange without a key", set: map[string]string{"routing_key": `''`}, bad: "reached no queue"},
	{name: "exchange over 255 bytes", set: map[string]string{"exchange": `repeat('e', 300)`}, bad: "the exchange column is 300 bytes"},
	{name: "routing key over 255 bytes", set: map[string]string{"routing_key": `repeat('k', 256)`}, bad: "the routing_key column is 256 bytes"},
	{name: "content type over 255 bytes", set: map[string]string{"content_type": `repeat('c', 400)`}, bad: "the content_type column is 400 bytes"},
	{name: "correlation id over 255 bytes", set: map[string]string{"correlation_id": `repeat('c', 1000)`}, bad: "the correlation_id column is 1000 bytes"},
	{name: "empty id", set: map[string]string{"id": `''`}, bad: "the id column is empty"},
	// Its log line names it by its first 256 bytes and a hash, not whole.
	{name: "a bad row with an id of 100 KB", set: map[string]string{"id": `'long-' || repeat('i', 100000)`, "headers": `'[1]'`},
		bad: "the headers column holds a JSON array, not an object"},
	{name: "id longer than a message-id", set: map[string]string{"id": `'long-' || repeat('i', 300)`},
		check: func(t *testing.T, id string, d transport.Delivery) {
			if header(d, acemq.HeaderID) != id || d.MessageID != "" {
				t.Errorf("x-acemq-id %d bytes, message-id %q; want the id whole in the header alone", len(header(d, acemq.HeaderID)), d.MessageID)
			}
		}},
	{name: "body over the outbox's maximum", set: map[string]string{"body": fmt.Sprintf(`decode(repeat('ab', %d), 'hex')`, maxBody+1)},
		bad: fmt.Sprintf("the body is %d bytes", maxBody+1)},
	{name: "empty body", set: map[string]string{"body": `''::bytea`},
		check: func(t *testing.T, _ string, d transport.Delivery) {
			if len(d.Body) != 0 {
				t.Errorf("body of %d bytes, want none", len(d.Body))
			}
		}},
	{name: "created_at infinity", set: map[string]string{"created_at": `'infinity'`}, bad: "created_at"},
	{name: "created_at -infinity", set: map[string]string{"created_at": `'-infinity'`}, bad: "created_at"},
	{name: "created_at far ahead", set: map[string]string{"created_at": `'200000-01-01 00:00:00Z'`}},
	{name: "attempts at the integer maximum", set: map[string]string{"attempts": `2147483647`, "headers": `'[]'`}, bad: "JSON array"},
	{name: "attempts negative", set: map[string]string{"attempts": `-3`}},

	// A schema that drifted from CreateTableSQL's.
	{name: "drift: NULL id", drift: dropNotNull, set: map[string]string{"id": `NULL`}, bad: "the id column is NULL"},
	{name: "drift: NULL exchange", drift: dropNotNull, set: map[string]string{"exchange": `NULL`}, bad: "the exchange column is NULL"},
	{name: "drift: NULL routing key", drift: dropNotNull, set: map[string]string{"routing_key": `NULL`}, bad: "the routing_key column is NULL"},
	{name: "drift: NULL content type", drift: dropNotNull, set: map[string]string{"content_type": `NULL`}},
	{name: "drift: NULL correlation id", drift: dropNotNull, set: map[string]string{"correlation_id": `NULL`}},
	{name: "drift: NULL body", drift: dropNotNull, set: map[string]string{"body": `NULL`}, bad: "the body column is NULL"},
	{name: "drift: NULL created_at", drift: dropNotNull, set: map[string]string{"created_at": `NULL`}, bad: "the created_at column is NULL"},
	{name: "drift: NULL attempts", drift: dropNotNull, set: map[string]string{"attempts": `NULL`, "headers": `'"x"'`}, bad: "JSON string"},
	{name: "drift: NULL next_attempt_at", drift: `ALTER TABLE {table} ALTER COLUMN next_attempt_at DROP NOT NULL`,
		set: map[string]string{"next_attempt_at": `NULL`}, check: noUserHeaders},
	{name: "drift: NULL next_attempt_at, a bad row", drift: `ALTER TABLE {table} ALTER COLUMN next_attempt_at DROP NOT NULL`,
		set: map[string]string{"next_attempt_at": `NULL`, "headers": `'[1]'`}, bad: "the headers column holds a JSON array, not an object"},
	{name: "drift: headers as text, not JSON", drift: `ALTER TABLE {table} ALTER COLUMN headers TYPE text`,
		set: map[string]string{"headers": `'not json'`}, bad: "the headers column cannot be read as JSON"},
	{name: "drift: headers as text, two values", drift: `ALTER TABLE {table} ALTER COLUMN headers TYPE text`,
		set: map[string]string{"headers": `'{} {}'`}, bad: "more than one JSON value"},
	{name: "drift: headers as json, duplicate keys", drift: `ALTER TABLE {table} ALTER COLUMN headers TYPE json`,
		set: map[string]string{"headers": `'{"a": 1, "a": 2}'`},
		check: func(t *testing.T, _ string, d transport.Delivery) {
			if d.Headers["a"] != int64(2) {
				t.Errorf("header a = %#v, want the last, 2", d.Headers["a"])
			}
		}},
}

// TestRelaySurvivesHostileRows runs the relay over each hostile row
// between two good ones, in a table of its own: the good rows are
// published once and deleted, a bad row stays with its attempt counted
// and a last error that names what is wrong, and the relay carries on.
func TestRelaySurvivesHostileRows(t *testing.T) {
	t.Parallel()
	h := newHostileBench(t)
	// One at a time: each relay holds a listening connection of the pool.
	for _, c := range hostileRows {
		t.Run(c.name, func(t *testing.T) { h.run(t, []hostile{c}) })
	}
}

// TestRelaySurvivesHostileRowsTogether puts every hostile row of the
// table's own schema into one batch, between good ones.
func TestRelaySurvivesHostileRowsTogether(t *testing.T) {
	t.Parallel()
	var cs []hostile
	for _, c := range hostileRows {
		if c.drift == "" {
			cs = append(cs, c)
		}
	}
	newHostileBench(t).run(t, cs)
}

// hostileBench is the database pool and memory broker of hostile tests.
type hostileBench struct {
	pool *pgxpool.Pool
	mem  *memory.Broker
}

func newHostileBench(t *testing.T) *hostileBench {
	t.Helper()
	mem := memory.New(memory.WithRealClock())
	t.Cleanup(func() { _ = mem.Close() })
	return &hostileBench{pool: brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4}), mem: mem}
}

// run writes a good row, then each hostile row followed by a good one,
// relays them and checks the outcome of every row.
func (h *hostileBench) run(t *testing.T, cs []hostile) {
	t.Helper()
	ctx := context.Background()
	tr := h.mem.Connect()
	t.Cleanup(func() { _ = tr.Close() })
	queue := strings.ReplaceAll(uniq("outbox.hostile"), "_", ".")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: queue, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	c := collect(t, tr, queue)
	o := newOutbox(t, h.pool, outbox.WithMaxBodySize(maxBody))
	for _, hc := range cs {
		if hc.drift != "" {
			if _, err := h.pool.Exec(ctx, strings.ReplaceAll(hc.drift, "{table}", o.Table())); err != nil {
				t.Fatalf("drift: %v", err)
			}
		}
	}

	good := map[string]bool{}
	goodRow := func(i int) {
		for _, id := range write(t, h.pool, o, outbox.Message{Queue: queue, ID: fmt.Sprintf("good-%d", i), Body: []byte("good"),
			Headers: map[string]any{"n": i}}) {
			good[id] = true
		}
	}
	type inserted struct {
		hostile
		seq int64
		id  string
	}
	var rows []inserted
	goodRow(0)
	for i, hc := range cs {
		vals := map[string]string{
			"id": fmt.Sprintf("'hostile-%d'", i), "exchange": `''`, "routing_key": "{queue}", "headers": "NULL",
			"content_type": `''`, "correlation_id": `''`, "body": `'\x68'::bytea`, "created_at": "now()", "attempts": "0",
		}
		for k, v := range hc.set {
			vals[k] = v
		}
		var cols, exprs []string
		for k, v := range vals {
			cols = append(cols, k)
			exprs = append(exprs, strings.ReplaceAll(v, "{queue}", "'"+queue+"'"))
		}
		r := inserted{hostile: hc}
		var id *string
		err := h.pool.QueryRow(ctx, "INSERT INTO "+o.Table()+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(exprs, ", ")+
			") RETURNING seq, id", pgx.QueryExecModeSimpleProtocol).Scan(&r.seq, &id)
		if err != nil {
			t.Fatalf("insert %s: %v", hc.name, err)
		}
		if id != nil {
			r.id = *id
		}
		rows = append(rows, r)
		goodRow(i + 1)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	stop := run(t, newRelay(t, o, tr, fast, outbox.WithPollInterval(50*time.Millisecond), outbox.WithBatchSize(2*len(cs)+1),
		outbox.WithLogger(zap.New(core))))

	// Done when every good row was delivered and deleted and every bad
	// row has had an attempt recorded.
	state := func() (left map[int64]rowState, err error) {
		left = map[int64]rowState{}
		res, err := h.pool.Query(ctx, "SELECT seq, coalesce(attempts, 0), coalesce(last_error, '') FROM "+o.Table())
		if err != nil {
			return nil, err
		}
		var s rowState
		var seq int64
		_, err = pgx.ForEachRow(res, []any{&seq, &s.attempts, &s.lastError}, func() error {
			left[seq] = s
			return nil
		})
		return left, err
	}
	wantGood := len(good)
	for _, r := range rows {
		if r.bad == "" {
			wantGood++
		}
	}
	var left map[int64]rowState
	settled := func() bool {
		got, _ := c.snapshot()
		var err error
		if left, err = state(); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for _, r := range rows {
			s, ok := left[r.seq]
			switch {
			case r.bad == "" && ok, r.bad != "" && ok && s.attempts < 1:
				return false
			case r.bad != "":
				bad++
			}
		}
		// Every good row deleted, every bad one attempted (or, wrongly,
		// gone: reported below), every good one delivered.
		return len(left) <= bad && len(distinct(got)) >= wantGood
	}
	// What did not settle is reported row by row below.
	polltest.Until(polltest.Generous, settled)
	time.Sleep(100 * time.Millisecond) // room for a duplicate to show
	if err := stop(); err != nil {
		t.Fatalf("Run = %v; no row may stop the relay", err)
	}

	got, _ := c.snapshot()
	seen := distinct(got)
	byID := map[string]transport.Delivery{}
	for _, d := range got {
		byID[header(d, acemq.HeaderID)] = d
	}
	for id := range good {
		if seen[id] != 1 {
			t.Errorf("good row %s delivered %d times, want once", id, seen[id])
		}
	}
	for _, r := range rows {
		s, kept := left[r.seq]
		if r.bad == "" {
			if kept || seen[r.id] != 1 {
				t.Errorf("%s: delivered %d times, row kept %v (last error %q); want it published once and deleted", r.name, seen[r.id], kept, s.lastError)
				continue
			}
			if r.check != nil {
				r.check(t, r.id, byID[r.id])
			}
			continue
		}
		if seen[r.id] != 0 {
			t.Errorf("%s: delivered %d times; it cannot be published as it stands", r.name, seen[r.id])
		}
		switch {
		case !kept:
			t.Errorf("%s: the row is gone", r.name)
		case s.attempts < 1 || !strings.Contains(s.lastError, r.bad):
			t.Errorf("%s: attempts %d, last error %q; want an attempt, and an error that says %q", r.name, s.attempts, s.lastError, r.bad)
		}
		logged := logs.Filter(func(e observer.LoggedEntry) bool {
			m := e.ContextMap()
			return m["seq"] == r.seq && m["id"] == logging.Cut(r.id, logging.IDCap) && m["error"] != nil
		})
		if logged.Len() == 0 {
			t.Errorf("%s: no log line names the row's seq %d and id %q", r.name, r.seq, r.id)
		}
	}
	// A row's trouble is the row's: no claim or record of a batch failed.
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
		t.Errorf("%d relay errors; a hostile row must not fail its batch", n)
	}
	if t.Failed() {
		for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			t.Logf("relay: %s %v", e.Message, e.ContextMap())
		}
	}
}

type rowState struct {
	attempts  int32
	lastError string
}

// panicky is a transport whose Publish panics for two message ids: the
// runtime's nil map, and a value no text column can hold as it is.
type panicky struct{ transport.Transport }

func (p *panicky) Publish(ctx context.Context, pub transport.Publishing) (transport.Confirmation, error) {
	switch pub.Headers[acemq.HeaderID] {
	case "nil-map":
		var m map[string]any
		//lint:ignore SA5000 the runtime's own panic is the point
		m["boom"] = 1
	case "odd-value":
		panic("a NUL \x00, bad UTF-8 \xff, and a lot more: " + strings.Repeat("x", 10000))
	}
	return p.Transport.Publish(ctx, pub)
}

// A panic while one row is published is that row's error: the rest of
// the batch goes out and the relay runs on.
func TestRelayRecoversAPanicOfOneRow(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	c := collect(t, f.tr, f.queue)
	ids := write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("a")},
		outbox.Message{Queue: f.queue, ID: "nil-map", Body: []byte("b")}, outbox.Message{Queue: f.queue, Body: []byte("c")},
		outbox.Message{Queue: f.queue, ID: "odd-value", Body: []byte("d")}, outbox.Message{Queue: f.queue, Body: []byte("e")})
	core, logs := observer.New(zapcore.ErrorLevel)
	stop := run(t, newRelay(t, f.o, &panicky{Transport: f.tr}, fast, outbox.WithLogger(zap.New(core))))
	got := c.wait(t, 3, 10*time.Second)
	polltest.Eventually(t, "the rows that panicked recorded", func() bool {
		n1, _, _ := f.attemptsOf(t, "nil-map")
		n2, _, _ := f.attemptsOf(t, "odd-value")
		return n1 >= 1 && n2 >= 1
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if seen := distinct(got); seen[ids[0]] != 1 || seen[ids[2]] != 1 || seen[ids[4]] != 1 || len(seen) != 3 {
		t.Errorf("deliveries %v; want the three that did not panic, once each", seen)
	}
	for id, want := range map[string]string{"nil-map": "panicked: assignment to entry in nil map", "odd-value": `panicked: a NUL \x00, bad UTF-8 ?`} {
		_, last, ok := f.attemptsOf(t, id)
		if !ok || !strings.Contains(last, want) || len(last) > 4096 {
			t.Errorf("%s: row kept %v, last error %.100q (%d bytes); want it to say %q", id, ok, last, len(last), want)
		}
		stacks := logs.Filter(func(e observer.LoggedEntry) bool {
			m := e.ContextMap()
			s, _ := m["stack"].(string)
			return m["id"] == id && m["seq"] != nil && strings.Contains(s, "panicky")
		})
		if stacks.Len() == 0 {
			t.Errorf("%s: no error log with the row's seq and id and the panic's stack", id)
		}
	}
	if n := logs.FilterMessageSnippet("batch failed").Len(); n != 0 {
		t.Errorf("%d batches failed; a panic is its row's failure", n)
	}
}

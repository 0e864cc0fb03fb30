package faults_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
)

// hostileRow is a row another writer left in an outbox table, inserted
// with raw SQL: cols are SQL expressions over a good row's ($1 is the
// job's body); bad is what its last_error must say, empty for a row the
// relay must publish.
type hostileRow struct {
	cols map[string]string
	bad  string
}

var hostileRows = []hostileRow{
	{cols: map[string]string{"headers": `'null'::jsonb`}}, // the reported case: a nil map, marshalled
	{cols: map[string]string{"headers": `NULL`}},
	{cols: map[string]string{"headers": `'{"x-acemq-id": "spoof", "x-acemq-attempt": 7, "tenant": "acme"}'`}},
	{cols: map[string]string{"id": `'long-' || repeat('i', 300)`}},
	{cols: map[string]string{"attempts": `-3`, "created_at": `'200000-01-01 00:00:00Z'`}},
	{cols: map[string]string{"headers": `'[1,2]'`}, bad: "the headers column holds a JSON array, not an object"},
	{cols: map[string]string{"headers": `'"x"'`}, bad: "JSON string, not an object"},
	{cols: map[string]string{"headers": `'42'`}, bad: "JSON number, not an object"},
	{cols: map[string]string{"headers": `'true'`}, bad: "JSON boolean, not an object"},
	{cols: map[string]string{"headers": `('{"deep": ' || repeat('[', 10001) || repeat(']', 10001) || '}')::jsonb`}, bad: "cannot be read as JSON"},
	{cols: map[string]string{"headers": `('{"deep": ' || repeat('[', 40) || repeat(']', 40) || '}')::jsonb`}, bad: "header-depth"},
	{cols: map[string]string{"headers": `jsonb_build_object('big', repeat('x', 200000))`}, bad: "headers is"},
	{cols: map[string]string{"headers": `(SELECT jsonb_build_object('big', string_agg(md5(i::text), '')) FROM generate_series(1, 65536) i)`}, bad: "the headers column takes"},
	{cols: map[string]string{"headers": `'{"n": 1e400}'`}, bad: `header "n"`},
	{cols: map[string]string{"headers": `jsonb_build_object(repeat('k', 300), 1)`}, bad: "header name is 300 bytes"},
	{cols: map[string]string{"exchange": `'faults.no.such.exchange'`, "routing_key": `'k'`}, bad: "not found"},
	{cols: map[string]string{"routing_key": `''`}, bad: "reached no queue"},
	{cols: map[string]string{"exchange": `repeat('e', 300)`}, bad: "the exchange column is 300 bytes"},
	{cols: map[string]string{"routing_key": `repeat('k', 256)`}, bad: "the routing_key column is 256 bytes"},
	{cols: map[string]string{"content_type": `repeat('c', 400)`}, bad: "the content_type column is 400 bytes"},
	{cols: map[string]string{"correlation_id": `repeat('c', 1000)`}, bad: "the correlation_id column is 1000 bytes"},
	{cols: map[string]string{"id": `''`}, bad: "the id column is empty"},
	{cols: map[string]string{"body": `decode(repeat('ab', 70000), 'hex')`}, bad: "the body is 70000 bytes"},
	{cols: map[string]string{"created_at": `'infinity'`}, bad: "the created_at column is infinity"},
	{cols: map[string]string{"attempts": `2147483647`, "headers": `'[]'`}, bad: "JSON array"},
}

// TestFaultOutboxHostileRows is the outbox relay over rows no Write made:
// 200 messages written by services, with a hostile row after every eighth
// (headers that are JSON null, not an object, too deep or too large, a
// number no AMQP type holds, names over 255 bytes, an exchange that does
// not exist, an empty id, a body over the maximum, created_at infinity,
// attempts at the integer maximum), relayed to RabbitMQ. Every good row is
// delivered and deleted; every bad one stays with an attempt and a
// last_error naming its trouble; the relay runs on throughout.
func TestFaultOutboxHostileRows(t *testing.T) {
	t.Parallel()
	const name = "outbox-hostile-rows"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	log := testLogger(t)
	q := "faults." + name
	table := fmt.Sprintf("faults_hostile_%d", time.Now().UnixNano()%1e9)
	ob, err := outbox.New(pool, outbox.WithTable(table), outbox.WithMaxBodySize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, ob.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()")
	})
	l := newLedger()
	tr := dial(t, url, log)
	srv := serve(t, tr, q, &acemq.Server{}, l.handler(0), log)

	js := jobs(name, 200)
	for i := range js {
		js[i] = job{ID: js[i].ID} // every one accepted: the subject is the relay
	}
	var sent []job
	bad := map[int64]hostileRow{} // by seq
	next := 0
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, j := range js {
			if _, err := ob.Write(ctx, tx, outbox.Message{Queue: q, ID: j.ID, Body: body(j), ContentType: "application/json"}); err != nil {
				return err
			}
			sent = append(sent, j)
			if i%8 != 7 || next == len(hostileRows) {
				continue
			}
			h := hostileRows[next]
			hj := job{ID: fmt.Sprintf("%s-hostile-%02d", name, next)}
			next++
			seq, id, err := insertHostile(ctx, tx, table, q, hj, h)
			if err != nil {
				return err
			}
			switch {
			case h.bad != "":
				bad[seq] = h
			default:
				sent = append(sent, job{ID: id})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != len(hostileRows) {
		t.Fatalf("only %d of %d hostile rows written", next, len(hostileRows))
	}

	relay, err := outbox.NewRelay(ob, dial(t, url, log), outbox.WithBatchSize(50), outbox.WithConcurrency(8),
		outbox.WithPollInterval(200*time.Millisecond), outbox.WithBackoff(100*time.Millisecond, time.Second), outbox.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	ran := make(chan error, 1)
	go func() { ran <- relay.Run(rctx) }()

	type state struct {
		attempts int32
		last     string
	}
	var rows map[int64]state
	settled := func() bool {
		select {
		case err := <-ran:
			ran <- err
			t.Fatalf("the relay stopped: %v", err)
		default:
		}
		rows = map[int64]state{}
		res, err := pool.Query(ctx, "SELECT seq, attempts, coalesce(last_error, '') FROM "+table)
		if err != nil {
			return false
		}
		var seq int64
		var r state
		if _, err := pgx.ForEachRow(res, []any{&seq, &r.attempts, &r.last}, func() error { rows[seq] = r; return nil }); err != nil {
			return false
		}
		for seq := range bad {
			if rows[seq].attempts < 1 {
				return false
			}
		}
		return len(rows) == len(bad) && l.allAccepted(sent)
	}
	// Progress: rows relayed and deleted, messages handled, bad rows
	// attempted. The relay and the server are given as long as they keep
	// moving, on a machine as busy as it may be.
	progress := func() int {
		n := len(l.acceptedCopy()) - len(rows)
		for seq := range bad {
			n += int(rows[seq].attempts)
		}
		return n
	}
	if ok, waited := untilProgress(30*time.Second, 5*time.Minute, progress, settled); !ok {
		t.Errorf("%s: after %s (the last 30 s without progress, or 5 min in all) %d rows left (want the %d bad ones, attempted), every good one accepted %v",
			name, waited.Round(time.Second), len(rows), len(bad), l.allAccepted(sent))
	}
	select {
	case err := <-ran:
		t.Fatalf("the relay stopped: %v", err)
	default:
	}
	stopRelay()
	if err := <-ran; err != nil {
		t.Errorf("Run = %v", err)
	}

	seqs := make([]int64, 0, len(bad))
	for seq := range bad {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		h, r := bad[seq], rows[seq]
		if r.attempts < 1 || !strings.Contains(r.last, h.bad) {
			t.Errorf("%s: row %d: attempts %d, last error %.200q; want an attempt and %q", name, seq, r.attempts, r.last, h.bad)
		}
	}
	good := map[string]bool{}
	for _, j := range sent {
		good[j.ID] = true
	}
	for id := range l.acceptedCopy() {
		if !good[id] {
			t.Errorf("%s: %.60s was delivered, though its row cannot be published as it stands", name, id)
		}
	}
	t.Logf("%s: %d good rows delivered, %d bad rows kept with their reasons", name, len(sent), len(bad))
	if err := srv.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	newSink(url, q).collect(t, name, sent, l.acceptedCopy(), testPolicy()).report(t)
}

// insertHostile inserts h, for job j on queue q unless h says otherwise,
// and returns its seq and id.
func insertHostile(ctx context.Context, tx pgx.Tx, table, q string, j job, h hostileRow) (int64, string, error) {
	vals := map[string]string{
		"id": "'" + j.ID + "'", "exchange": `''`, "routing_key": "'" + q + "'", "headers": "NULL",
		"content_type": `'application/json'`, "correlation_id": `''`, "body": "$1::bytea", "created_at": "now()", "attempts": "0",
	}
	for k, v := range h.cols {
		vals[k] = v
	}
	var cols, exprs []string
	for k, v := range vals {
		cols = append(cols, k)
		exprs = append(exprs, v)
	}
	args := []any{body(j)}
	if !strings.Contains(strings.Join(exprs, " "), "$1") {
		args = nil
	}
	var seq int64
	var id string
	err := tx.QueryRow(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(exprs, ", ")+") RETURNING seq, id",
		args...).Scan(&seq, &id)
	if err != nil {
		return 0, "", fmt.Errorf("insert hostile row %v: %w", h.cols, err)
	}
	return seq, id, nil
}

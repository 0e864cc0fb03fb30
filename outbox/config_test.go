package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport/memory"
)

func TestNew(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	if _, err := outbox.New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := outbox.New(pool, outbox.WithMaxBodySize(0)); err == nil {
		t.Error("New with a max body size of 0 succeeded")
	}
	for _, name := range []string{"", "Outbox", "out-box", `x"; DROP TABLE orders; --`, "a.b.c", "s.", strings.Repeat("t", 49)} {
		if _, err := outbox.New(pool, outbox.WithTable(name)); !errors.Is(err, outbox.ErrInvalidTable) {
			t.Errorf("WithTable(%q): New = %v, want ErrInvalidTable", name, err)
		}
	}
	for _, name := range []string{"outbox", "app.outbox", strings.Repeat("t", 48), strings.Repeat("s", 63) + "." + strings.Repeat("t", 48)} {
		o, err := outbox.New(pool, outbox.WithTable(name))
		if err != nil {
			t.Errorf("WithTable(%q): %v", name, err)
			continue
		}
		if o.Table() != name {
			t.Errorf("Table() = %q, want %q", o.Table(), name)
		}
	}
	o, err := outbox.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	if o.Table() != outbox.DefaultTable || !strings.Contains(o.CreateTableSQL(), `CREATE TABLE IF NOT EXISTS "acemq_outbox"`) {
		t.Errorf("default table %q, SQL:\n%s", o.Table(), o.CreateTableSQL())
	}
}

func TestNewRelay(t *testing.T) {
	t.Parallel()
	o, err := outbox.New(brokertest.RefusedPool(t))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	tr := mem.Connect()
	if _, err := outbox.NewRelay(nil, tr); err == nil {
		t.Error("NewRelay with a nil outbox succeeded")
	}
	if _, err := outbox.NewRelay(o, nil); err == nil {
		t.Error("NewRelay with a nil transport succeeded")
	}
	for name, opt := range map[string]outbox.RelayOption{
		"batch 0":           outbox.WithBatchSize(0),
		"concurrency -1":    outbox.WithConcurrency(-1),
		"poll 0":            outbox.WithPollInterval(0),
		"backoff 0":         outbox.WithBackoff(0, time.Second),
		"backoff max < min": outbox.WithBackoff(time.Second, time.Millisecond),
		"stop timeout 0":    outbox.WithStopTimeout(0),
	} {
		if _, err := outbox.NewRelay(o, tr, opt); err == nil {
			t.Errorf("NewRelay with %s succeeded", name)
		}
	}
	if _, err := outbox.NewRelay(o, tr, outbox.WithLogger(nil), outbox.WithMeterProvider(nil)); err != nil {
		t.Errorf("nil logger and meter provider mean the defaults: %v", err)
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	t.Parallel()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 2})
	o := newOutbox(t, pool, outbox.WithMaxBodySize(1024))
	long := strings.Repeat("q", 256)
	for _, tc := range []struct {
		name string
		msg  outbox.Message
		want error
		says string
	}{
		{"queue and exchange", outbox.Message{Queue: "q", Exchange: "x"}, outbox.ErrInvalidMessage, "both Queue"},
		{"queue and routing key", outbox.Message{Queue: "q", RoutingKey: "k"}, outbox.ErrInvalidMessage, "both Queue"},
		{"no target", outbox.Message{Body: []byte("x")}, outbox.ErrInvalidMessage, "default exchange needs a queue name"},
		{"long queue", outbox.Message{Queue: long}, outbox.ErrInvalidMessage, "RoutingKey is 256 bytes"},
		{"long exchange", outbox.Message{Exchange: long, RoutingKey: "k"}, outbox.ErrInvalidMessage, "Exchange is 256 bytes"},
		{"long id", outbox.Message{Queue: "q", ID: long}, outbox.ErrInvalidMessage, "ID is 256 bytes"},
		{"bad utf-8", outbox.Message{Queue: "q\xff"}, outbox.ErrInvalidMessage, "UTF-8"},
		{"nul", outbox.Message{Queue: "q", CorrelationID: "a\x00b"}, outbox.ErrInvalidMessage, "NUL"},
		{"body too large", outbox.Message{Queue: "q", Body: make([]byte, 1025)}, outbox.ErrTooLarge, "1025 bytes, more than the 1024"},
		{"reserved header", outbox.Message{Queue: "q", Headers: map[string]any{"x-acemq-id": "mine"}}, outbox.ErrInvalidMessage, "set by the relay"},
		{"header not JSON", outbox.Message{Queue: "q", Headers: map[string]any{"c": make(chan int)}}, outbox.ErrInvalidMessage, "JSON"},
		{"header NUL", outbox.Message{Queue: "q", Headers: map[string]any{"s": "a\x00"}}, outbox.ErrInvalidMessage, "NUL"},
		{"headers too large", outbox.Message{Queue: "q", Headers: map[string]any{"big": strings.Repeat("h", 70000)}}, outbox.ErrTooLarge, "AMQP frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				_, err := o.Write(context.Background(), tx, tc.msg)
				return err
			})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Write = %v; want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
	// What is allowed at the limits is written.
	write(t, pool, o,
		outbox.Message{Queue: "q", Body: make([]byte, 1024)},
		outbox.Message{Exchange: "fanout.x"}, // a fanout exchange needs no key
		outbox.Message{Queue: strings.Repeat("q", 255), Headers: map[string]any{"s": `back\u0000slash`}},
	)
	if s, err := o.Stats(context.Background()); err != nil || s.Pending != 3 {
		t.Errorf("Stats = %+v, %v; want the 3 good messages and none of the bad", s, err)
	}
	if _, err := o.Write(context.Background(), nil, outbox.Message{Queue: "q"}); err == nil {
		t.Error("Write with a nil transaction succeeded")
	}
}

func TestWriteDefaultMaxBody(t *testing.T) {
	t.Parallel()
	o, err := outbox.New(brokertest.RefusedPool(t))
	if err != nil {
		t.Fatal(err)
	}
	// Validation comes before any I/O, so a transaction that would fail
	// is never reached.
	_, err = o.Write(context.Background(), failingTx{}, outbox.Message{Queue: "q", Body: make([]byte, outbox.DefaultMaxBodySize+1)})
	if !errors.Is(err, outbox.ErrTooLarge) {
		t.Errorf("Write of 16 MiB + 1 = %v, want ErrTooLarge", err)
	}
}

// failingTx is a pgx.Tx whose every call fails.
type failingTx struct{ pgx.Tx }

// Command partitions is a ledger whose account events must be applied in
// order, spread over four partitions of one queue so that four handlers
// work at once: each account's events always go to the same partition,
// and an ordered partition hands them over one at a time, in order.
//
//	go run ./examples/partitions                       # memory transport, no broker
//	go run ./examples/partitions -amqp amqp://guest:guest@localhost:5672/
//
// It publishes five events for each of eight accounts, interleaved, and
// prints which partition each account's events went to, the balance each
// account ends with, and whether every event was applied in the order it
// was published.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

// ledger is the partitioned queue: ledger.p0 to ledger.p3.
var ledger = acemq.Partitioned{Queue: "acemq.example.ledger", Count: 4}

var accounts = []string{"ada", "grace", "linus", "ken", "barbara", "dennis", "margaret", "edsger"}

// amounts are each account's events, in the order they must be applied:
// a withdrawal applied before the deposit it needs would be refused.
var amounts = []int{+100, -30, +5, -70, +20}

func main() {
	url := flag.String("amqp", "", "RabbitMQ URL; empty runs on the in-process memory transport")
	flag.Parse()
	if err := run(os.Stdout, *url); err != nil {
		fmt.Fprintln(os.Stderr, "partitions:", err)
		os.Exit(1)
	}
}

// book is what the handler did: each account's balance, the sequence
// numbers it applied in the order it applied them, and the partition each
// came from.
type book struct {
	mu        sync.Mutex
	balance   map[string]int
	applied   map[string][]int
	partition map[string]int
	events    int
}

func run(out io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t, closeTransport, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer closeTransport()

	b := &book{balance: map[string]int{}, applied: map[string][]int{}, partition: map[string]int{}}
	mux := acemq.NewMux()
	mux.HandleFunc(ledger.Queue, func(ctx context.Context, m *acemq.Message) ack.Ack {
		account := m.Header("account").(string)
		seq, err := strconv.Atoi(string(m.Body()))
		if err != nil {
			return ack.Park(fmt.Errorf("event %q is not a sequence number: %w", m.Body(), err))
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.balance[account]+amounts[seq] < 0 {
			return ack.DeadLetter(fmt.Errorf("%s: event %d would overdraw the account: applied out of order", account, seq))
		}
		b.balance[account] += amounts[seq]
		b.applied[account] = append(b.applied[account], seq)
		b.partition[account] = m.Partition().Index
		b.events++
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: t, Handler: mux, Queues: map[string]acemq.QueueConfig{
		ledger.Queue: {Partitions: ledger.Count, Ordered: true, Args: map[string]any{"x-queue-type": "quorum"}},
	}}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-runErr:
		return err
	}
	pub := &acemq.Publisher{Transport: t, Mandatory: true}
	for seq := range amounts {
		for _, account := range accounts {
			_, err := pub.Publish(ctx, acemq.Outgoing{
				RoutingKey: ledger.For(account), // the account's partition
				Body:       []byte(strconv.Itoa(seq)),
				Headers:    map[string]any{"account": account},
			})
			if err != nil {
				return err
			}
		}
	}
	want := len(accounts) * len(amounts)
	for b.count() < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d events applied in time: %w", b.count(), want, ctx.Err())
		case err := <-runErr:
			return fmt.Errorf("the server stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-runErr; err != nil {
		return err
	}
	b.report(out)
	return nil
}

func (b *book) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.events
}

// report prints each partition's accounts, then each account's balance
// and whether its events were applied in order.
func (b *book) report(out io.Writer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range ledger.Queues() {
		var held []string
		for _, a := range accounts {
			if b.partition[a] == i {
				held = append(held, a)
			}
		}
		fmt.Fprintf(out, "%s: %v\n", q, held)
	}
	sorted := slices.Sorted(slices.Values(accounts))
	for _, a := range sorted {
		order := "in order"
		if !slices.Equal(b.applied[a], []int{0, 1, 2, 3, 4}) {
			order = fmt.Sprintf("OUT OF ORDER %v", b.applied[a])
		}
		fmt.Fprintf(out, "%-9s balance %3d, events %s\n", a, b.balance[a], order)
	}
}

// connect returns the memory transport (on wall time) or RabbitMQ.
func connect(ctx context.Context, url string) (transport.Transport, func(), error) {
	if url == "" {
		b := memory.New(memory.WithRealClock())
		c := b.Connect()
		return c, func() { c.Close(); b.Close() }, nil
	}
	t, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq-example-partitions"))
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}

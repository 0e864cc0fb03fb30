package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// The delay commands (lateness and scheduled) share a vhost's delay
// infrastructure (package delay) with whatever else uses that vhost, so
// they count what waits in it before they start: a command that may leave
// messages of its own on the level queues purges them afterwards only
// when nothing else was waiting there, and the scheduled command, which
// always leaves them, refuses a vhost whose delay queues are in use.

// subcommands are the commands beside the default comparison run.
var subcommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"lateness":  runLateness,
	"scheduled": runScheduled,
}

// runSubcommand runs args[0] as a subcommand, if it names one.
func runSubcommand(args []string, stdout, stderr io.Writer) (ran bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		return false, nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return true, cmd(ctx, args[1:], stdout, stderr)
}

// delayQueues are the queues of the delay infrastructure: the 28 levels
// and the undeliverable queue.
func delayQueues() []string {
	qs := make([]string, 0, delay.Levels+1)
	for k := range delay.Levels {
		qs = append(qs, delay.Level(k))
	}
	return append(qs, delay.Undeliverable)
}

// declareDelayed declares the delay infrastructure, then queue (with
// args, nil for a classic durable queue) bound to it.
func declareDelayed(ctx context.Context, tr transport.Transport, queue string, args map[string]any) error {
	bd, err := delay.Bind(queue)
	if err != nil {
		return err
	}
	top := delay.Topology()
	top.Queues = append(top.Queues, transport.Queue{Name: queue, Durable: true, Args: args})
	top.Bindings = append(top.Bindings, bd)
	if err := tr.Declare(ctx, top); err != nil {
		return fmt.Errorf("declare the delay infrastructure and %s: %w", queue, err)
	}
	return nil
}

// waiting is the messages ready in the delay queues, in all.
func (a *admin) waiting() (int, error) {
	total := 0
	for _, q := range delayQueues() {
		n, err := a.count(q)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// purge empties the queues named.
func (a *admin) purge(queues ...string) error {
	for _, q := range queues {
		err := a.with(func(ch *amqp.Channel) error {
			_, err := ch.QueuePurge(q, false)
			return err
		})
		if err != nil {
			return fmt.Errorf("purge %s: %w", q, err)
		}
	}
	return nil
}

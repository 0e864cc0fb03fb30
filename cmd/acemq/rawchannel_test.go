package main

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rawChannel is a channel of amqp091-go's own on a connection to u, as a
// foreign client would have, both closed when the test ends (the
// connection may be closed sooner: a test of what goes with it).
func rawChannel(t *testing.T, u string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}

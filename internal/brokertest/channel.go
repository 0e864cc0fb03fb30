package brokertest

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// OnChannel runs f on a channel of a plain amqp091-go connection to url, of
// its own and closed when f returns: for the set-up, clean-up and counting
// that the library under test does not offer or must not do itself (a
// queue deleted, a raw publish, where every message of a fault scenario
// ended). The dial gives up after 10 s.
func OnChannel(url string, f func(ch *amqp.Channel) error) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	return f(ch)
}

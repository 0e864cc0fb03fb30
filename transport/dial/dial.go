// Package dial returns the transport a URL names, so that a service
// configured from its environment picks its broker, or the in-memory one
// in a test, by URL alone.
package dial

import (
	"context"
	"errors"
	"strings"

	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

// ErrURL is what Transport returns for a URL whose scheme names no
// transport. Its text quotes nothing of the URL, which may hold a password.
var ErrURL = errors.New("acemq: the transport URL's scheme is not amqp, amqps or memory (the URL is not shown, as it may hold a password)")

// Transport returns the transport a URL names:
//
//   - amqp://user:password@host:5672/vhost and amqps://...: RabbitMQ, by
//     transport/amqp's Dial with opts (the error never shows the password);
//   - memory://name: a connection to the process's in-memory broker of that
//     name (memory.Shared), made on first use, on the wall clock: for a
//     laptop with no broker, and tests of the wiring (a test of timing
//     wants acemqtest's virtual clock). opts do not apply.
//
// Close the transport when done; a memory broker outlives its connections.
func Transport(ctx context.Context, url string, opts ...rabbitmq.Option) (transport.Transport, error) {
	scheme, rest, ok := strings.Cut(url, "://")
	switch {
	case ok && strings.EqualFold(scheme, "memory"):
		return memory.Shared(rest).Connect(), nil
	case ok && (strings.EqualFold(scheme, "amqp") || strings.EqualFold(scheme, "amqps")):
		t, err := rabbitmq.Dial(ctx, url, opts...)
		if err != nil {
			return nil, err // not a nil *Transport in a non-nil interface
		}
		return t, nil
	}
	return nil, ErrURL
}

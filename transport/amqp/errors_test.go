package rabbitmq

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	tests := []struct {
		name string
		in   error
		want error
	}{
		{"404", &amqp.Error{Code: 404, Reason: "NOT_FOUND - no queue 'q'"}, transport.ErrNotFound},
		{"406", &amqp.Error{Code: 406, Reason: "PRECONDITION_FAILED - inequivalent arg"}, transport.ErrPreconditionFailed},
		{"403", &amqp.Error{Code: 403, Reason: "ACCESS_REFUSED"}, transport.ErrAccessRefused},
		{"wrapped 404", fmt.Errorf("x: %w", &amqp.Error{Code: 404}), transport.ErrNotFound},
		{"closed conn", amqpconn.ErrClosed, transport.ErrClosed},
		{"vhost connection limit", &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - access to vhost 'v' refused for user 'guest': connection limit (0) is reached"}, transport.ErrRefused},
		{"user connection limit", &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - connection refused for user 'u': user connection limit (1) is reached"}, transport.ErrRefused},
		{"vhost gone", &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - vhost v not found"}, transport.ErrNotFound},
		{"vhost access withdrawn", &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - access to vhost 'v' refused for user 'u'"}, transport.ErrAccessRefused},
		{"other amqp", amqp.ErrClosed, amqp.ErrClosed},
		{"plain", plain, plain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tt.in)
			if !errors.Is(got, tt.want) {
				t.Fatalf("classify(%v) = %v, want errors.Is %v", tt.in, got, tt.want)
			}
		})
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
	got := classify(&amqp.Error{Code: 406, Reason: "PRECONDITION_FAILED - inequivalent arg 'x-queue-type'"})
	if !strings.Contains(got.Error(), "inequivalent arg 'x-queue-type'") {
		t.Fatalf("the broker's reason is lost: %v", got)
	}
}

func TestUnconfirmedWrapsBoth(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	err := unconfirmed(&transport.Publishing{RoutingKey: "q"}, cause)
	if !errors.Is(err, transport.ErrUnconfirmed) || !errors.Is(err, cause) {
		t.Fatalf("%v must wrap ErrUnconfirmed and its cause", err)
	}
}

package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/acemq/acemq/transport"
)

// TestPublishedOf: each answer a transport gives a copy's publish starts
// the fallback table's row the wire contract names (next_test.go takes it
// from there): the step of publishOnce that TestNext cannot reach.
func TestPublishedOf(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("acemq: publish to queue %q: %w", "q.dlq", err) }
	tests := []struct {
		name    string
		conf    transport.Confirmation
		err     error
		delayed bool
		want    published
	}{
		{"confirmed, routed", transport.Confirmation{Routed: true}, nil, false, copyRouted},
		{"confirmed, unroutable", transport.Confirmation{}, nil, false, copyUnroutable},
		{"nacked", transport.Confirmation{}, wrap(transport.ErrNacked), false, copyNacked},
		{"blocked by an alarm", transport.Confirmation{}, wrap(transport.ErrBlocked), false, copyBlocked},
		{"not sent: the broker stalled", transport.Confirmation{}, wrap(fmt.Errorf("not sent: %w", transport.ErrStalled)), false, copyBlocked},
		{"too large", transport.Confirmation{}, wrap(transport.ErrTooLarge), false, copyTooLarge},
		{"a delay level's exchange missing", transport.Confirmation{}, wrap(transport.ErrNotFound), true, copyUnroutable},
		{"the vhost gone", transport.Confirmation{}, wrap(transport.ErrNotFound), false, copyForGood},
		{"access withdrawn", transport.Confirmation{}, wrap(transport.ErrAccessRefused), false, copyForGood},
		{"refused for now (a connection limit)", transport.Confirmation{}, wrap(errors.Join(transport.ErrRefused, transport.ErrAccessRefused)), false, copyUnknown},
		{"no confirm", transport.Confirmation{}, wrap(transport.ErrUnconfirmed), false, copyUnknown},
		{"the transport closed", transport.Confirmation{}, transport.ErrClosed, false, copyUnknown},
		{"anything else", transport.Confirmation{}, errors.New("write: broken pipe"), false, copyUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := publishedOf(tt.conf, tt.err, tt.delayed); got != tt.want {
				t.Errorf("publishedOf(%+v, %v, delayed %v) = %d, want %d", tt.conf, tt.err, tt.delayed, got, tt.want)
			}
		})
	}
}

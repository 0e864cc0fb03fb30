package rabbitmq

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestDecideClose: what a subscription makes of each way its channel or
// connection ends, with the reasons RabbitMQ 3.10.8 and amqp091-go v1.16
// give (as seen on the broker).
func TestDecideClose(t *testing.T) {
	t.Parallel()
	const q = "orders"
	server := func(code int, text string) error { return &amqp.Error{Code: code, Reason: text, Server: true} }
	tests := []struct {
		name       string
		err        error
		want       error // the sentinel, nil for none
		final      bool
		unreadable bool
	}{
		{"queue gone on resubscribe", server(404, "NOT_FOUND - no queue 'orders' in vhost 'v'"), transport.ErrNotFound, true, false},
		{"read permission withdrawn", server(403, "ACCESS_REFUSED - access to queue 'orders' in vhost 'v' refused for user 'guest'"), transport.ErrAccessRefused, true, false},
		{"vhost deleted, reconnect refused", errors.Join(errors.New("amqpconn: refused"), server(530, "NOT_ALLOWED - vhost v not found")), transport.ErrNotFound, true, false},
		{"vhost access withdrawn, reconnect refused", server(530, "NOT_ALLOWED - access to vhost 'v' refused for user 'guest'"), transport.ErrAccessRefused, true, false},
		{"vhost connection limit, reconnect refused for now", server(530, "NOT_ALLOWED - access to vhost 'v' refused for user 'guest': connection limit (200) is reached"), transport.ErrRefused, false, false},
		{"user connection limit, reconnect refused for now", server(530, "NOT_ALLOWED - connection refused for user 'svc': user connection limit (10) is reached"), transport.ErrRefused, false, false},
		{"vhost down, reconnect refused for now", server(541, "INTERNAL_ERROR - access to vhost 'v' refused for user 'guest': vhost 'v' is down"), transport.ErrRefused, false, false},
		{"credentials refused", &amqp.Error{Code: 403, Reason: "username or password not allowed"}, transport.ErrAccessRefused, true, false},
		{"consumer timeout", server(406, "PRECONDITION_FAILED - delivery acknowledgement on channel 2 timed out. Timeout value used: 1000 ms. This timeout value can be configured, see consumers doc guide to learn more"), transport.ErrConsumerTimeout, false, false},
		{"another precondition", server(406, "PRECONDITION_FAILED - unknown delivery tag 7"), nil, false, false},
		{"vhost deleted, connection forced", server(320, "CONNECTION_FORCED - vhost 'v' is deleted"), transport.ErrClosed, false, false},
		{"operator closed it", server(320, "CONNECTION_FORCED - acemq test: forced reconnect"), transport.ErrClosed, false, false},
		{"unreadable delivery", &amqp.Error{Code: 501, Reason: `Exception (502) Reason: "invalid field or value inside of a frame"`}, nil, false, true},
		{"socket lost", &amqp.Error{Code: 501, Reason: "EOF"}, nil, false, false},
		{"no reason", errors.New("closed without a reason"), nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideClose(q, tt.err)
			if got.final != tt.final || got.unreadable != tt.unreadable {
				t.Fatalf("final=%v unreadable=%v, want final=%v unreadable=%v (%v)", got.final, got.unreadable, tt.final, tt.unreadable, got.err)
			}
			if tt.want != nil && !errors.Is(got.err, tt.want) {
				t.Fatalf("err = %v, want %v", got.err, tt.want)
			}
			for _, s := range []error{transport.ErrNotFound, transport.ErrAccessRefused, transport.ErrConsumerTimeout, transport.ErrClosed, transport.ErrCancelled, transport.ErrRefused} {
				if s != tt.want && errors.Is(got.err, s) {
					t.Errorf("err = %v also matches %v", got.err, s)
				}
			}
			var ae *amqp.Error
			if errors.As(tt.err, &ae) && !strings.Contains(got.err.Error(), ae.Reason) {
				t.Errorf("err %q drops the broker's words %q", got.err, ae.Reason)
			}
		})
	}
	end := decideCancel(q)
	if !end.final || !errors.Is(end.err, transport.ErrCancelled) || !strings.Contains(end.err.Error(), q) {
		t.Fatalf("decideCancel = %+v", end)
	}
}

package amqpconn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// TestClassify: every refusal of a connection.open, in the words
// RabbitMQ 3.10.8 wrote them on this machine (vhost and user limits set
// with rabbitmqctl, permissions cleared, a vhost that does not exist, a
// wrong password) and in those of later versions' rabbit_reader.
func TestClassify(t *testing.T) {
	t.Parallel()
	server := func(code int, text string) error { return &amqp.Error{Code: code, Reason: text, Server: true} }
	tcpRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name  string
		err   error
		want  Refusal
		cause string
	}{
		{"vhost limit", server(530, "NOT_ALLOWED - access to vhost 'v' refused for user 'guest': connection limit (0) is reached"), Transient, CauseVhostConnectionLimit},
		{"vhost limit of 200", server(530, "NOT_ALLOWED - access to vhost 'orders' refused for user 'svc': connection limit (200) is reached"), Transient, CauseVhostConnectionLimit},
		{"vhost limit not queried", server(530, "NOT_ALLOWED - access to vhost 'v' refused for user 'guest': connection limit cannot be queried, timeout"), Transient, CauseVhostConnectionLimit},
		{"user limit 3.10", server(530, "NOT_ALLOWED - Connection refused for user 'svc': user connection limit (1) is reached"), Transient, CauseUserConnectionLimit},
		{"user limit 3.10.8 as seen", server(530, "NOT_ALLOWED - connection refused for user 'svc': user connection limit (0) is reached"), Transient, CauseUserConnectionLimit},
		{"node limit", server(530, "NOT_ALLOWED - connection refused: node connection limit (5000) is reached"), Transient, CauseNodeConnectionLimit},
		{"vhost down", server(541, "INTERNAL_ERROR - access to vhost 'v' refused for user 'guest': vhost 'v' is down"), Transient, CauseVhostDown},
		{"node not listening", fmt.Errorf("connect acemq consume: %w", tcpRefused), Transient, CauseNodeNotAccepting},
		{"vhost deleted", server(530, "NOT_ALLOWED - vhost v not found"), Permanent, CauseVhostNotFound},
		{"vhost deleted, wrapped", errors.Join(errors.New("amqpconn: refused"), server(530, "NOT_ALLOWED - vhost v not found")), Permanent, CauseVhostNotFound},
		{"no permission", server(530, "NOT_ALLOWED - access to vhost 'v' refused for user 'svc'"), Permanent, CauseAccessRefused},
		{"wrong password", server(403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."), Permanent, CauseAccessRefused},
		{"amqp091-go's credentials", amqp.ErrCredentials, Permanent, CauseAccessRefused},
		{"loopback-only user", server(403, "ACCESS_REFUSED - PLAIN login refused: user 'guest' can only connect via localhost"), Permanent, CauseAccessRefused},
		{"another 541", server(541, "INTERNAL_ERROR"), NotRefused, ""},
		{"operator closed it", server(320, "CONNECTION_FORCED - Closed via management plugin"), NotRefused, ""},
		{"maintenance", server(320, "CONNECTION_FORCED - Node was put into maintenance mode"), NotRefused, ""},
		{"socket lost", &amqp.Error{Code: 501, Reason: "EOF"}, NotRefused, ""},
		{"timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, NotRefused, ""},
		{"nil", nil, NotRefused, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Classify(tt.err)
			if v.Refusal != tt.want || v.Cause != tt.cause {
				t.Fatalf("Classify = %v %q, want %v %q", v.Refusal, v.Cause, tt.want, tt.cause)
			}
			var ae *amqp.Error
			if errors.As(tt.err, &ae) && v.Refusal != NotRefused && v.Reply != ae {
				t.Errorf("Reply = %v, want the broker's %v", v.Reply, ae)
			}
		})
	}
}

// TestRefusedErrorWords: the streak's error says the broker's words, the
// cause, the count, and that it waits; it unwraps to the attempt's error.
func TestRefusedErrorWords(t *testing.T) {
	t.Parallel()
	reply := &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - access to vhost 'v' refused for user 'guest': connection limit (3) is reached", Server: true}
	e := &RefusedError{Cause: CauseVhostConnectionLimit, Reply: reply, Err: reply, Tries: 4, Since: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)}
	for _, want := range []string{"connection limit (3) is reached (530)", "connection_limit", "4 attempt(s)", "2026-12-01T23:00:00Z", "trying again"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%q lacks %q", e, want)
		}
	}
	if !errors.Is(e, reply) {
		t.Error("RefusedError does not unwrap to the broker's reply")
	}
}

// TestStreak: refusals for now make one streak, counted, with the broker's
// words (the URL's password hidden in them, even where it is the user's
// name), told to listeners, a listener that comes late told at once, and
// ended with nil by the reconnect; a refusal for good is kept apart, for
// ChannelUnlessRefused, and a refusal for now clears it.
func TestStreak(t *testing.T) {
	t.Parallel()
	const u = "amqp://s3cret:s3cret@broker.example/v"
	c := &Conn{cfg: Config{URLs: []string{u}, Name: "test"}, log: zap.NewNop(), refused: make(chan struct{})}
	var told []*RefusedError
	stop := c.NotifyRefused(func(r *RefusedError) { told = append(told, r) })
	limit := &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - connection refused for user 's3cret': user connection limit (1) is reached", Server: true}
	if !c.noteRefusal(limit, u) || !c.noteRefusal(limit, u) {
		t.Fatal("a connection limit is not a refusal for now")
	}
	r := c.Refused()
	if r == nil || r.Tries != 2 || r.Cause != CauseUserConnectionLimit {
		t.Fatalf("Refused = %+v, want two tries of user_connection_limit", r)
	}
	if strings.Contains(r.Reason(), "s3cret") || strings.Contains(r.Error(), "s3cret") {
		t.Errorf("the streak shows the password: %q", r.Error())
	}
	if !strings.Contains(r.Reason(), "user connection limit (1) is reached") {
		t.Errorf("Reason %q lost the broker's words", r.Reason())
	}
	var late []*RefusedError
	stopLate := c.NotifyRefused(func(r *RefusedError) { late = append(late, r) })
	defer stopLate()
	if len(late) != 1 || late[0].Tries != 2 {
		t.Fatalf("a listener registered mid-streak was told %v, want the streak at once", late)
	}

	gone := &amqp.Error{Code: 530, Reason: "NOT_ALLOWED - vhost v not found", Server: true}
	if c.noteRefusal(gone, u) {
		t.Fatal("a deleted vhost is taken for a refusal for now")
	}
	if _, err := c.connection(t.Context(), true); err == nil {
		t.Fatal("ChannelUnlessRefused's wait does not end on a vhost gone")
	}
	c.noteRefusal(limit, u)
	c.mu.Lock()
	kept := c.refusal
	c.mu.Unlock()
	if kept != nil {
		t.Errorf("a refusal for now after one for good left %v for ChannelUnlessRefused", kept)
	}

	c.endStreak(true)
	if c.Refused() != nil {
		t.Error("the streak outlived the reconnect")
	}
	if n := len(told); n != 4 || told[0] == nil || told[n-1] != nil {
		t.Fatalf("the listener was told %v, want three refusals then nil", told)
	}
	stop()
	c.noteRefusal(limit, u)
	if len(told) != 4 {
		t.Error("a listener was told after it stopped")
	}
}

package redact

import "testing"

func TestURLsIn(t *testing.T) {
	cases := []struct{ in, want string }{
		{"dial postgres://svc:hunter2@db:5432/orders: connection refused", "dial postgres://svc:xxxxx@db:5432/orders: connection refused"},
		{"two: amqp://a:b@x and AMQPS://c:d@y/v", "two: amqp://a:xxxxx@x and AMQPS://c:xxxxx@y/v"},
		{"no password: http://ops@host/ and http://host:8080/", "no password: http://ops@host/ and http://host:8080/"},
		{"no url at all: a:b@c", "no url at all: a:b@c"},
		{"", ""},
	}
	for _, c := range cases {
		if got := URLsIn(c.in); got != c.want {
			t.Errorf("URLsIn(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

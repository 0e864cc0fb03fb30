package engine

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/flow"
)

func TestMarkerFor(t *testing.T) {
	since := time.UnixMilli(1_700_000_000_000)
	until := since.Add(time.Minute)
	long := strings.Repeat("q", 250)
	cases := []struct {
		name      string
		queue     string
		st        flow.Status
		wantNone  bool
		wantName  string
		wantUntil bool
		wantWhy   string
	}{
		{name: "closed: none", queue: "orders", st: flow.Status{State: flow.Closed}, wantNone: true},
		{name: "open", queue: "orders", st: flow.Status{State: flow.Open, Since: since, Until: until, Why: "down"},
			wantName: "orders.breaker.web-1-ab12", wantUntil: true, wantWhy: "down"},
		{name: "half-open: no until", queue: "orders", st: flow.Status{State: flow.HalfOpen, Since: since, Why: "probing"},
			wantName: "orders.breaker.web-1-ab12", wantWhy: "probing"},
		{name: "a why over 1 KiB is cut on a rune", queue: "orders",
			st:       flow.Status{State: flow.Open, Since: since, Until: until, Why: strings.Repeat("é", 600)},
			wantName: "orders.breaker.web-1-ab12", wantUntil: true, wantWhy: strings.Repeat("é", 510) + "…"},
		{name: "a URL's password is hidden", queue: "orders",
			st:       flow.Status{State: flow.Open, Since: since, Until: until, Why: "dial postgres://svc:hunter2@db:5432: refused"},
			wantName: "orders.breaker.web-1-ab12", wantUntil: true, wantWhy: "dial postgres://svc:xxxxx@db:5432: refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, ok := markerFor(c.queue, "web-1-ab12", c.st)
			if ok == c.wantNone {
				t.Fatalf("markerFor = %v, want a marker %v", ok, !c.wantNone)
			}
			if c.wantNone {
				return
			}
			if q.Name != c.wantName || !q.Exclusive || q.Durable {
				t.Errorf("declared %q exclusive=%v durable=%v, want %q exclusive, not durable", q.Name, q.Exclusive, q.Durable, c.wantName)
			}
			if q.Args["x-acemq-breaker-queue"] != c.queue || q.Args["x-acemq-breaker-state"] != c.st.State.String() ||
				q.Args["x-acemq-breaker-since"] != since.UnixMilli() || q.Args["x-acemq-breaker-instance"] != "web-1-ab12" {
				t.Errorf("arguments %v", q.Args)
			}
			if _, has := q.Args["x-acemq-breaker-until"]; has != c.wantUntil {
				t.Errorf("until present %v, want %v", has, c.wantUntil)
			}
			if q.Args["x-acemq-breaker-why"] != c.wantWhy {
				t.Errorf("why %q, want %q", q.Args["x-acemq-breaker-why"], c.wantWhy)
			}
		})
	}
	t.Run("a name over 255 bytes is cut and ends in a hash", func(t *testing.T) {
		a, b := markerName(long+"a", "web-1-ab12"), markerName(long+"b", "web-1-ab12")
		if len(a) > 255 || !utf8.ValidString(a) || a == b || !strings.HasPrefix(a, long[:200]) {
			t.Errorf("names %q (%d bytes) and %q: want distinct, at most 255 bytes, starting with the queue", a, len(a), b)
		}
		if got := markerName("orders", "i"); got != "orders.breaker.i" {
			t.Errorf("short name %q", got)
		}
	})
}

func TestNewInstanceIsNameSafe(t *testing.T) {
	a, b := newInstance(), newInstance()
	if a == b {
		t.Errorf("two instances share the id %q", a)
	}
	for _, r := range a {
		if !(r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')) {
			t.Fatalf("instance %q holds %q", a, r)
		}
	}
}

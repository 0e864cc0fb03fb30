package flow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/transport/memory"
)

var errWarehouse = errors.New("the warehouse is not answering")

// script drives a breaker on a virtual clock, one word a step:
//
//	S F I   a delivery allowed (it must start) and reported at once:
//	        success, failure, ignored
//	a       a delivery allowed (it must start) and held
//	s f i   the oldest held delivery reported
//	x       a delivery refused
//	+1m     the clock advanced (any time.ParseDuration)
//
// It returns the breaker and each change as "from→to".
func script(t *testing.T, s flow.BreakerSettings, steps string) (*flow.Breaker, []string) {
	t.Helper()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, s)
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	note := func(ev flow.Event) {
		if ev.Changed() {
			changes = append(changes, ev.From.String()+"→"+ev.To.String())
		}
	}
	var held []flow.Permit
	outcome := map[byte]flow.Outcome{'S': flow.Success, 'F': flow.Failure, 'I': flow.Ignored, 's': flow.Success, 'f': flow.Failure, 'i': flow.Ignored}
	for i, step := range strings.Fields(steps) {
		switch c := step[0]; {
		case c == '+':
			d, err := time.ParseDuration(step[1:])
			if err != nil {
				t.Fatalf("step %d %q: %v", i, step, err)
			}
			clock.Advance(d)
		case c == 'x':
			d := b.Allow()
			note(d.Event)
			if d.Start {
				t.Fatalf("step %d %q: a delivery started in state %s, want refused", i, step, d.State)
			}
		case c == 'a' || c == 'S' || c == 'F' || c == 'I':
			d := b.Allow()
			note(d.Event)
			if !d.Start {
				t.Fatalf("step %d %q: refused in state %s (until %v), want started", i, step, d.State, d.Until)
			}
			if c == 'a' {
				held = append(held, d.Permit)
				continue
			}
			note(b.Report(d.Permit, outcome[c], errWarehouse))
		case c == 's' || c == 'f' || c == 'i':
			if len(held) == 0 {
				t.Fatalf("step %d %q: nothing held", i, step)
			}
			note(b.Report(held[0], outcome[c], errWarehouse))
			held = held[1:]
		default:
			t.Fatalf("step %d %q: unknown", i, step)
		}
	}
	return b, changes
}

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	ten := flow.BreakerSettings{Window: 10, MinOutcomes: 10, FailureRatio: 0.5, CoolDown: time.Minute, Probes: 1, CloseAfter: 3}
	four := flow.BreakerSettings{Window: 4, MinOutcomes: 4, FailureRatio: 0.75, CoolDown: time.Minute, Probes: 1, CloseAfter: 3}
	two := flow.BreakerSettings{Window: 2, MinOutcomes: 2, FailureRatio: 1, CoolDown: time.Minute, Probes: 1, CloseAfter: 2}
	const trip = "F F " // trips two
	tests := []struct {
		name    string
		s       flow.BreakerSettings
		steps   string
		want    flow.State
		changes string
	}{
		{"stays closed below the minimum", ten, "F F F F F F F F F", flow.Closed, ""},
		{"opens when the window trips", ten, "F F F F F F F F F F", flow.Open, "closed→open"},
		{"a success that fills the window trips it too", ten, "F F F F F F F F F S", flow.Open, "closed→open"},
		{"stays closed below the ratio", ten, "S F S F S F S F S S", flow.Closed, ""},
		{"opens at the ratio", ten, "S F S F S F S F S F", flow.Open, "closed→open"},
		{"successes keep it closed however long", ten, strings.Repeat("S ", 50), flow.Closed, ""},
		{"the window slides: old failures are forgotten", four, "F F S S S F", flow.Closed, ""},
		{"the window slides: the last four trip it", four, "F F S S S F F F", flow.Open, "closed→open"},
		{"a not-counted outcome changes nothing", four, "F F F I I I I I I", flow.Closed, ""},
		{"a not-counted outcome fills no slot", four, "F F F I I I F", flow.Open, "closed→open"},
		{"open refuses before the cool-down", two, trip + "x +59s x", flow.Open, "closed→open"},
		{"half-open after the cool-down", two, trip + "+1m S", flow.HalfOpen, "closed→open open→half-open"},
		{"half-open lets one probe at a time", two, trip + "+1m a x x s a x", flow.HalfOpen, "closed→open open→half-open"},
		{"closes after the successes", two, trip + "+1m S S", flow.Closed, "closed→open open→half-open half-open→closed"},
		{"closed again starts with an empty window", two, trip + "+1m S S F", flow.Closed, "closed→open open→half-open half-open→closed"},
		{"re-opens on a half-open failure", two, trip + "+1m S F x", flow.Open, "closed→open open→half-open half-open→open"},
		{"a failed probe opens it for another cool-down", two, trip + "+1m F +59s x +1s S S", flow.Closed,
			"closed→open open→half-open half-open→open open→half-open half-open→closed"},
		{"a not-counted probe frees its slot without a verdict", two, trip + "+1m a x i a s S", flow.Closed,
			"closed→open open→half-open half-open→closed"},
		{"a not-counted probe does not break the row", two, trip + "+1m S I S", flow.Closed, "closed→open open→half-open half-open→closed"},
		{"a permit from before the trip counts for nothing after it", two, "a " + trip + "+1m S f", flow.HalfOpen, "closed→open open→half-open"},
		{"a success from before the trip is no probe", two, "a " + trip + "+1m a s x", flow.HalfOpen, "closed→open open→half-open"},
		{"a probe never reported holds its slot", two, trip + "+1m a +1h x", flow.HalfOpen, "closed→open open→half-open"},
		{"defaults: 19 failures do not trip", flow.BreakerSettings{}, strings.Repeat("F ", 19), flow.Closed, ""},
		{"defaults: the 20th does, a minute's cool-down, three to close", flow.BreakerSettings{},
			strings.Repeat("F ", 20) + "x +59s x +1s S S a x s", flow.Closed, "closed→open open→half-open half-open→closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, changes := script(t, tt.s, tt.steps)
			if got := strings.Join(changes, " "); got != tt.changes {
				t.Errorf("changes %q, want %q", got, tt.changes)
			}
			if got := b.State(); got != tt.want {
				t.Errorf("state %s, want %s", got, tt.want)
			}
			if got := b.Status().State; got != tt.want {
				t.Errorf("Status().State %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBreakerEvents(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	start := clock.Now()
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 10, MinOutcomes: 10, FailureRatio: 0.5, CoolDown: 30 * time.Second, CloseAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	report := func(o flow.Outcome, err error) flow.Event {
		t.Helper()
		d := b.Allow()
		if !d.Start {
			t.Fatalf("refused in %s", d.State)
		}
		return b.Report(d.Permit, o, err)
	}
	for range 3 {
		report(flow.Success, nil)
	}
	for i := range 6 {
		if ev := report(flow.Failure, errors.New("an older failure")); ev.Changed() {
			t.Fatalf("failure %d changed the state: %v", i, ev)
		}
	}
	clock.Advance(5 * time.Second)
	ev := report(flow.Failure, errWarehouse)
	want := flow.Event{From: flow.Closed, To: flow.Open, At: start.Add(5 * time.Second), Until: start.Add(35 * time.Second),
		Why: "7 of the last 10 failed: the warehouse is not answering", Err: errWarehouse}
	if ev != want {
		t.Fatalf("trip\n got %#v\nwant %#v", ev, want)
	}
	if got, want := ev.String(), "closed → open: 7 of the last 10 failed: the warehouse is not answering"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	st := b.Status()
	if st.State != flow.Open || !st.Since.Equal(ev.At) || !st.Until.Equal(ev.Until) || st.Why != ev.Why || st.Err != errWarehouse {
		t.Errorf("Status() = %+v after %+v", st, ev)
	}

	d := b.Allow()
	if d.Start || d.State != flow.Open || !d.Until.Equal(want.Until) || d.Wake == nil || d.Event.Changed() {
		t.Fatalf("open: %+v, want refused until %v with a wake channel", d, want.Until)
	}

	clock.Advance(30 * time.Second)
	d = b.Allow()
	if !d.Start || d.State != flow.HalfOpen {
		t.Fatalf("after the cool-down: %+v, want a probe", d)
	}
	if d.Event.From != flow.Open || d.Event.To != flow.HalfOpen || !d.Event.At.Equal(start.Add(35*time.Second)) ||
		d.Event.Why != "the cool-down of 30s is over: probing with 1 at a time" {
		t.Errorf("half-open event %#v", d.Event)
	}
	probeErr := errors.New("still down")
	ev = b.Report(d.Permit, flow.Failure, probeErr)
	if ev.To != flow.Open || ev.Why != "a probe failed: still down" || ev.Err != probeErr || !ev.Until.Equal(start.Add(65*time.Second)) {
		t.Errorf("re-open event %#v", ev)
	}
	clock.Advance(30 * time.Second)
	b.Report(b.Allow().Permit, flow.Success, nil)
	ev = report(flow.Success, nil)
	if ev.From != flow.HalfOpen || ev.To != flow.Closed || ev.Why != "2 probes in a row succeeded" || ev.Err != nil {
		t.Errorf("close event %#v", ev)
	}
	if st := b.Status(); st.Outcomes != 0 || st.Failures != 0 {
		t.Errorf("window after closing: %d outcomes, %d failures; want empty", st.Outcomes, st.Failures)
	}
	var zero flow.Event
	if zero.Changed() || zero.String() != "no change" {
		t.Errorf("zero Event: Changed %v, String %q", zero.Changed(), zero.String())
	}
}

func TestBreakerWake(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 1, CoolDown: time.Minute, CloseAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	b.Report(b.Allow().Permit, flow.Failure, errWarehouse)
	open := b.Allow()
	if open.Start || open.Wake == nil {
		t.Fatalf("open: %+v", open)
	}
	if again := b.Allow(); again.Wake != open.Wake {
		t.Error("a second refusal got another wake channel: one is enough until the next change")
	}
	select {
	case <-open.Wake:
		t.Fatal("woken before any change")
	default:
	}
	clock.Advance(time.Minute)
	probe := b.Allow()
	if !probe.Start {
		t.Fatalf("no probe after the cool-down: %+v", probe)
	}
	<-open.Wake // closed by the change to half-open
	full := b.Allow()
	if full.Start || full.State != flow.HalfOpen || full.Wake == nil {
		t.Fatalf("second probe: %+v, want refused with a wake channel", full)
	}
	b.Report(probe.Permit, flow.Success, nil) // one of two: still half-open
	<-full.Wake                               // the probe's slot is free
	if b.State() != flow.HalfOpen {
		t.Fatalf("state %s after one of two successes", b.State())
	}
}

func TestBreakerTripAndReset(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	held := b.Allow()
	ev := b.Trip("tripped by hand: acemqtest")
	if ev.From != flow.Closed || ev.To != flow.Open || ev.Why != "tripped by hand: acemqtest" || !ev.Until.Equal(clock.Now().Add(flow.DefaultCoolDown)) {
		t.Fatalf("Trip: %#v", ev)
	}
	clock.Advance(30 * time.Second)
	if ev := b.Trip("again"); ev.Changed() {
		t.Errorf("Trip when open changed the state: %v", ev)
	}
	if d := b.Allow(); !d.Until.Equal(clock.Now().Add(flow.DefaultCoolDown)) {
		t.Errorf("a second Trip did not start the cool-down again: until %v", d.Until)
	}
	if ev := b.Report(held.Permit, flow.Success, nil); ev.Changed() {
		t.Errorf("a permit from before the trip changed the state: %v", ev)
	}
	ev = b.Reset("reset by hand")
	if ev.From != flow.Open || ev.To != flow.Closed || b.State() != flow.Closed {
		t.Fatalf("Reset: %#v, state %s", ev, b.State())
	}
	if ev := b.Reset("again"); ev.Changed() {
		t.Errorf("Reset when closed changed the state: %v", ev)
	}
}

func TestBreakerHeld(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	t0 := clock.Now()
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 1, CoolDown: time.Minute, CloseAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Held(t0.Add(-time.Hour)); got != 0 {
		t.Fatalf("Held before any outage = %s", got)
	}
	clock.Advance(time.Minute)
	b.Report(b.Allow().Permit, flow.Failure, errWarehouse) // open at t0+1m
	clock.Advance(5 * time.Minute)
	if got := b.Held(t0); got != 5*time.Minute {
		t.Errorf("Held during the outage = %s, want 5m", got)
	}
	d := b.Allow() // half-open at t0+6m: still held
	clock.Advance(4 * time.Minute)
	b.Report(d.Permit, flow.Success, nil) // closed at t0+10m
	clock.Advance(time.Hour)
	tests := []struct {
		since time.Time
		want  time.Duration
	}{
		{t0, 9 * time.Minute},                      // created before: the whole outage, open and half-open
		{t0.Add(3 * time.Minute), 7 * time.Minute}, // created during it: the part it waited through
		{t0.Add(11 * time.Minute), 0},              // created after it
	}
	for _, tt := range tests {
		if got := b.Held(tt.since); got != tt.want {
			t.Errorf("Held(t0+%s) = %s, want %s", tt.since.Sub(t0), got, tt.want)
		}
	}
	// A second outage adds up; a trip from half-open continues the first.
	b.Report(b.Allow().Permit, flow.Failure, errWarehouse)
	clock.Advance(2 * time.Minute)
	if got := b.Held(t0); got != 11*time.Minute {
		t.Errorf("Held over two outages = %s, want 11m", got)
	}
}

func TestBreakerHeldForgetsOldOutages(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	t0 := clock.Now()
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 1, CoolDown: time.Minute, CloseAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range flow.OutageMemory + 4 {
		b.Report(b.Allow().Permit, flow.Failure, errWarehouse)
		clock.Advance(time.Minute)
		b.Report(b.Allow().Permit, flow.Success, nil)
		clock.Advance(time.Minute)
	}
	if got, want := b.Held(t0), flow.OutageMemory*time.Minute; got != want {
		t.Errorf("Held = %s, want %s: the last %d outages", got, want, flow.OutageMemory)
	}
}

func TestBreakerSettings(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	s := b.Settings()
	if s.Window != 20 || s.MinOutcomes != 20 || s.FailureRatio != 0.5 || s.CoolDown != time.Minute || s.Probes != 1 || s.CloseAfter != 3 || s.Counts == nil {
		t.Errorf("defaults: %+v", s)
	}
	b, err = flow.NewBreaker(clock, flow.BreakerSettings{Window: 5})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Settings(); s.MinOutcomes != 5 {
		t.Errorf("a window of 5 took a minimum of %d, want 5", s.MinOutcomes)
	}
	bad := []struct {
		name string
		s    flow.BreakerSettings
		want string
	}{
		{"negative window", flow.BreakerSettings{Window: -1}, "breaker window -1"},
		{"huge window", flow.BreakerSettings{Window: flow.MaxWindow + 1}, "breaker window 65537"},
		{"minimum over the window", flow.BreakerSettings{Window: 5, MinOutcomes: 6}, "could never trip"},
		{"negative minimum", flow.BreakerSettings{MinOutcomes: -1}, "minimum of -1"},
		{"ratio over one", flow.BreakerSettings{FailureRatio: 1.5}, "failure ratio 1.5"},
		{"negative ratio", flow.BreakerSettings{FailureRatio: -0.1}, "failure ratio -0.1"},
		{"NaN ratio", flow.BreakerSettings{FailureRatio: nan()}, "failure ratio NaN"},
		{"negative cool-down", flow.BreakerSettings{CoolDown: -time.Second}, "cool-down -1s"},
		{"negative probes", flow.BreakerSettings{Probes: -1}, "probes -1"},
		{"negative close after", flow.BreakerSettings{CloseAfter: -2}, "close after -2"},
	}
	for _, tt := range bad {
		_, err := flow.NewBreaker(clock, tt.s)
		if !errors.Is(err, flow.ErrSettings) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("%s: %v, want an ErrSettings naming %q", tt.name, err, tt.want)
		}
	}
	if _, err := flow.NewBreaker(nil, flow.BreakerSettings{}); !errors.Is(err, flow.ErrSettings) {
		t.Errorf("no clock: %v", err)
	}
}

package retry

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// DefaultBrokerWaitThreshold is the wait from which a retry waits in the
// broker (on a rung or the delay queues) rather than in the consumer,
// unless [Policy.WithBrokerWaitThreshold] says otherwise.
const DefaultBrokerWaitThreshold = 30 * time.Second

// DefaultMaxSnoozes is how many times a message may be snoozed
// (ack.Snooze) before it is dead-lettered, unless the policy says
// otherwise ([Policy.WithMaxSnoozes]).
const DefaultMaxSnoozes = 50

// DefaultJitter is the two-sided jitter [Exponential] carries: a delay moves
// up to 20% either way.
const DefaultJitter = 0.2

// Policy is an immutable retry policy. The zero Policy means "not set": a
// server treats it as no policy at all (one delivery), and a per-queue zero
// Policy inherits the server's. [None] is the explicit "one delivery".
type Policy struct {
	maxAttempts int
	initial     time.Duration
	max         time.Duration
	exponential bool
	jitter      float64
	threshold   time.Duration
	maxAge      time.Duration
	delays      bool // broker waits on the delay queues, not on rungs
	maxSnoozes  int  // 0: DefaultMaxSnoozes; <0: none allowed
}

// None is one delivery and no retry. A retry asked for under it dead-letters
// the message with a reason that says there was no policy.
func None() Policy {
	return Policy{maxAttempts: 1, threshold: DefaultBrokerWaitThreshold}
}

// Exponential doubles the wait from initial up to max (0 means no cap), for
// maxAttempts deliveries in all, with [DefaultJitter]. Out-of-range arguments
// are clamped: fewer than one attempt means one, a negative delay means zero.
func Exponential(maxAttempts int, initial, max time.Duration) Policy {
	return Policy{
		maxAttempts: max1(maxAttempts),
		initial:     max0(initial),
		max:         max0(max),
		exponential: true,
		jitter:      DefaultJitter,
		threshold:   DefaultBrokerWaitThreshold,
	}
}

// Fixed waits delay between each of maxAttempts deliveries, without jitter.
func Fixed(maxAttempts int, delay time.Duration) Policy {
	return Policy{
		maxAttempts: max1(maxAttempts),
		initial:     max0(delay),
		threshold:   DefaultBrokerWaitThreshold,
	}
}

// WithMaxAge returns a copy that dead-letters a message older than age
// before any further retry or snooze, however many attempts are left. Zero
// means never. [Policy.MaxAge] reads it back.
func (p Policy) WithMaxAge(age time.Duration) Policy {
	p.maxAge = max0(age)
	return p
}

// WithJitter returns a copy whose waits (all but a rung's) move by up to fraction of
// themselves either way (0.2 is ±20%). It is clamped to [0, 1].
func (p Policy) WithJitter(fraction float64) Policy {
	p.jitter = math.Min(math.Max(fraction, 0), 1)
	return p
}

// WithBrokerWaitThreshold returns a copy whose waits of d or longer are
// spent in the broker (on rung queues, or on the delay queues with
// [Policy.WithDelayQueues]); [DefaultBrokerWaitThreshold] unless given.
// Zero means never: every wait is held in the consumer, nothing declares
// or publishes to a rung. Pair that with declare off for a service that
// may not declare queues. [Policy.BrokerWaitThreshold] reads it back.
func (p Policy) WithBrokerWaitThreshold(d time.Duration) Policy {
	p.threshold = max0(d)
	return p
}

// WithDelayQueues returns a copy whose broker waits (those at or over the
// threshold) are spent on the delay queues of package delay (on true)
// instead of on the family's per-delay rung queues (on false, the
// default). The delay queues are quorum queues with at-least-once
// dead-lettering, so a wait survives the loss of a node, which a classic
// rung's does not; they carry any wait, so jitter applies above the
// threshold too; and they are shared by every queue of the vhost, so a
// policy change declares nothing new. Rungs stay the default because
// every family member declares and reads them. [Policy.DelayQueues] reads
// it back.
func (p Policy) WithDelayQueues(on bool) Policy {
	p.delays = on
	return p
}

// DelayQueues reports whether the policy's broker waits are spent on the
// delay queues rather than on rungs, as [Policy.WithDelayQueues] set it.
// [Policy.UsesDelayQueues] says whether any wait of the schedule is in
// fact spent there (none is when the threshold is zero, say).
func (p Policy) DelayQueues() bool { return p.delays }

// WithMaxSnoozes returns a copy that dead-letters a message snoozed n times
// already when it asks to be snoozed again; [DefaultMaxSnoozes] unless
// given. n of zero or less allows no snooze at all. [Policy.MaxSnoozes]
// reads it back.
func (p Policy) WithMaxSnoozes(n int) Policy {
	p.maxSnoozes = n
	if n <= 0 {
		p.maxSnoozes = -1
	}
	return p
}

// MaxSnoozes returns how many snoozes a message may have:
// [DefaultMaxSnoozes] unless [Policy.WithMaxSnoozes] said otherwise.
func (p Policy) MaxSnoozes() int {
	switch {
	case p.maxSnoozes == 0:
		return DefaultMaxSnoozes
	case p.maxSnoozes < 0:
		return 0
	}
	return p.maxSnoozes
}

// IsZero reports whether p is the zero Policy, meaning "not set".
func (p Policy) IsZero() bool { return p == Policy{} }

// MaxAttempts returns the number of deliveries, the first included.
func (p Policy) MaxAttempts() int { return max1(p.maxAttempts) }

// MaxAge returns the age from which a message is given up on; zero is never.
func (p Policy) MaxAge() time.Duration { return p.maxAge }

// BrokerWaitThreshold returns the wait from which the policy's waits, and
// those a handler chooses, are spent in the broker; zero means every wait
// is in the consumer.
func (p Policy) BrokerWaitThreshold() time.Duration { return p.threshold }

// Jitter returns the two-sided jitter fraction of in-process waits.
func (p Policy) Jitter() float64 { return p.jitter }

// TooOld reports whether a message of this age is past the policy's maximum.
func (p Policy) TooOld(age time.Duration) bool { return p.maxAge > 0 && age >= p.maxAge }

// Where is where a wait is spent.
type Where uint8

const (
	// InProcess: the consumer holds the message (unacknowledged) for the
	// wait; a restart cuts it short and the message comes back at once.
	InProcess Where = iota
	// OnRung: on the rung queue for the wait ([RungName]), a classic
	// queue with a TTL that dead-letters it home.
	OnRung
	// OnDelayQueues: on the delay queues of package delay, walked by the
	// broker's at-least-once dead-lettering.
	OnDelayQueues
)

var whereNames = [...]string{"process", "rung", "delay queues"}

// String names the place plainly: "process", "rung", "delay queues".
func (w Where) String() string {
	if int(w) < len(whereNames) {
		return whereNames[w]
	}
	return "where(" + strconv.Itoa(int(w)) + ")"
}

// Step is one retry's wait, before jitter, and where it is spent.
type Step struct {
	Delay time.Duration
	Where Where
}

// String reads "40s on a rung", "10s in the process".
func (s Step) String() string {
	switch s.Where {
	case InProcess:
		return FormatDelay(s.Delay) + " in the process"
	case OnRung:
		return FormatDelay(s.Delay) + " on a rung"
	}
	return FormatDelay(s.Delay) + " on the " + s.Where.String()
}

// Schedule returns the wait before each retry, without jitter, and where
// each is spent: one entry fewer than MaxAttempts, because the first
// delivery is not waited for.
func (p Policy) Schedule() []Step {
	n := p.MaxAttempts() - 1
	out := make([]Step, n)
	for i := range out {
		d := p.delay(i)
		out[i] = Step{Delay: d, Where: p.where(d)}
	}
	return out
}

// BrokerRungs returns the distinct waits, in increasing order, that happen on
// rung queues: each needs its own queue. None on the delay queues.
func (p Policy) BrokerRungs() []time.Duration {
	var rungs []time.Duration
	for _, s := range p.Schedule() {
		if s.Where == OnRung && !slices.Contains(rungs, s.Delay) {
			rungs = append(rungs, s.Delay)
		}
	}
	slices.Sort(rungs)
	return rungs
}

// UsesDelayQueues reports whether any wait of the schedule is spent on the
// delay queues.
func (p Policy) UsesDelayQueues() bool {
	for _, s := range p.Schedule() {
		if s.Where == OnDelayQueues {
			return true
		}
	}
	return false
}

// Wait is how long a message waits before its next attempt, and where.
type Wait struct {
	// Delay is the wait, jittered unless it is spent on a rung, whose TTL
	// is fixed when it is declared.
	Delay time.Duration
	// Where is where it is spent.
	Where Where
}

// WaitFor is where a wait the handler chose (ack.RetryAfter, ack.Snooze)
// is spent: below the threshold in the process; at or over it on the
// delay queues, whatever the policy's own broker waits use, since a rung
// carries only the one wait it was declared with.
func (p Policy) WaitFor(d time.Duration) Wait {
	if p.threshold > 0 && d >= p.threshold {
		return Wait{Delay: d, Where: OnDelayQueues}
	}
	return Wait{Delay: d}
}

// NextWait answers for one message whose attempt (1-based) just failed at
// the given age: how long and where to wait, or false when there should be
// no further attempt (attempts used up, or the message is too old).
func (p Policy) NextWait(attempt int, age time.Duration) (Wait, bool) {
	attempt = max1(attempt)
	if attempt >= p.MaxAttempts() || p.TooOld(age) {
		return Wait{}, false
	}
	d := p.delay(attempt - 1)
	w := p.where(d)
	if w != OnRung && p.jitter > 0 && d > 0 {
		d = clampDuration(float64(d) * (1 + p.jitter*(2*rand.Float64()-1)))
	}
	return Wait{Delay: d, Where: w}, true
}

// delay is the unjittered wait before retry i (0-based).
func (p Policy) delay(i int) time.Duration {
	if !p.exponential {
		return p.initial
	}
	d := float64(p.initial) * math.Pow(2, float64(i))
	if p.max > 0 && d > float64(p.max) {
		return p.max
	}
	return clampDuration(d)
}

// clampDuration converts d, never overflowing: a float at or past
// MaxInt64 converts to a negative Duration, which would make a wait fire at
// once, every time: a hot loop.
func clampDuration(d float64) time.Duration {
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(max(d, 0))
}

// where is where the policy spends its own wait of d.
func (p Policy) where(d time.Duration) Where {
	switch {
	case p.threshold <= 0 || d < p.threshold:
		return InProcess
	case p.delays:
		return OnDelayQueues
	}
	return OnRung
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func max0(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

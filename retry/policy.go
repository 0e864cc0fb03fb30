package retry

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// DefaultBrokerWaitThreshold is the wait from which a retry waits on a rung
// queue in the broker rather than in the consumer.
const DefaultBrokerWaitThreshold = 30 * time.Second

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

// GiveUpAfter returns a copy that dead-letters a message older than age
// before any further retry, however many attempts are left. Zero means never.
func (p Policy) GiveUpAfter(age time.Duration) Policy {
	p.maxAge = max0(age)
	return p
}

// WithJitter returns a copy whose in-process waits move by up to fraction of
// themselves either way (0.2 is ±20%). It is clamped to [0, 1].
func (p Policy) WithJitter(fraction float64) Policy {
	p.jitter = math.Min(math.Max(fraction, 0), 1)
	return p
}

// WaitInBrokerFrom returns a copy whose waits of d or longer happen on rung
// queues. Zero means never: every wait is held in the consumer, nothing
// declares or publishes to a rung. Pair that with declare off for a service
// that may not declare queues.
func (p Policy) WaitInBrokerFrom(d time.Duration) Policy {
	p.threshold = max0(d)
	return p
}

// IsZero reports whether p is the zero Policy, meaning "not set".
func (p Policy) IsZero() bool { return p == Policy{} }

// MaxAttempts returns the number of deliveries, the first included.
func (p Policy) MaxAttempts() int { return max1(p.maxAttempts) }

// MaxAge returns the age from which a message is given up on; zero is never.
func (p Policy) MaxAge() time.Duration { return p.maxAge }

// Threshold returns the broker-wait threshold; zero means every wait is in
// the consumer.
func (p Policy) Threshold() time.Duration { return p.threshold }

// Jitter returns the two-sided jitter fraction of in-process waits.
func (p Policy) Jitter() float64 { return p.jitter }

// TooOld reports whether a message of this age is past the policy's maximum.
func (p Policy) TooOld(age time.Duration) bool { return p.maxAge > 0 && age >= p.maxAge }

// Schedule returns the wait before each retry, without jitter: one entry
// fewer than MaxAttempts, because the first delivery is not waited for.
func (p Policy) Schedule() []time.Duration {
	n := p.MaxAttempts() - 1
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = p.delay(i)
	}
	return out
}

// BrokerRungs returns the distinct waits, in increasing order, that happen on
// rung queues: each needs its own queue.
func (p Policy) BrokerRungs() []time.Duration {
	var rungs []time.Duration
	for _, d := range p.Schedule() {
		if p.inBroker(d) && !slices.Contains(rungs, d) {
			rungs = append(rungs, d)
		}
	}
	slices.Sort(rungs)
	return rungs
}

// Wait is how long a message waits before its next attempt, and where.
type Wait struct {
	// Delay is the wait, jittered when it is spent in the consumer.
	Delay time.Duration
	// InBroker says the wait is spent on the rung queue for Delay.
	InBroker bool
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
	if p.inBroker(d) {
		return Wait{Delay: d, InBroker: true}, true
	}
	if p.jitter > 0 && d > 0 {
		d = clampDuration(float64(d) * (1 + p.jitter*(2*rand.Float64()-1)))
	}
	return Wait{Delay: d}, true
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

func (p Policy) inBroker(d time.Duration) bool { return p.threshold > 0 && d >= p.threshold }

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

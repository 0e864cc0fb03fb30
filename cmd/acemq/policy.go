package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
)

// policyFlags are the retry flags schedule and topology share. They must
// describe the policy the service runs with, or the rungs will not be the
// ones its consumers publish to.
type policyFlags struct {
	attempts  int
	initial   time.Duration
	max       time.Duration
	fixed     bool
	threshold time.Duration
	giveUp    time.Duration
	delays    bool // broker waits on the delay queues (retry.Policy.OnDelayQueues)
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&p.attempts, "attempts", 0, "deliveries in all, the first included (5 is one delivery and 4 retries)")
	fs.DurationVar(&p.initial, "initial", 0, "the first wait, e.g. 10s")
	fs.DurationVar(&p.max, "max", 0, "the longest wait an exponential policy doubles up to (0: no cap)")
	fs.BoolVar(&p.fixed, "fixed", false, "wait --initial every time instead of doubling (retry.Fixed)")
	fs.DurationVar(&p.threshold, "threshold", retry.DefaultBrokerWaitThreshold,
		"waits this long or longer are spent on a rung queue in the broker; 0: every wait in the process")
	fs.DurationVar(&p.giveUp, "give-up-after", 0, "dead-letter a message older than this instead of retrying it (0: never)")
	fs.BoolVar(&p.delays, "on-delay-queues", false,
		"spend the waits of --threshold or more on the delay queues ("+delay.Prefix+".NN, shared by the vhost) instead of on rungs (retry.Policy.OnDelayQueues)")
}

// given reports whether any retry flag was set.
func (p *policyFlags) given() bool { return p.attempts != 0 }

// policy builds the retry.Policy the flags describe.
func (p *policyFlags) policy() (retry.Policy, error) {
	switch {
	case p.attempts < 1:
		return retry.Policy{}, errors.New("--attempts must be at least 1")
	case p.initial < 0 || p.max < 0 || p.threshold < 0 || p.giveUp < 0:
		return retry.Policy{}, errors.New("durations may not be negative")
	case p.fixed && p.max != 0:
		return retry.Policy{}, errors.New("--max is for an exponential policy; a --fixed one waits --initial every time")
	case p.attempts > 1 && p.initial == 0:
		return retry.Policy{}, errors.New("--initial is needed when there are retries (e.g. --initial 1s)")
	}
	pol := retry.Exponential(p.attempts, p.initial, p.max)
	if p.fixed {
		pol = retry.Fixed(p.attempts, p.initial)
	}
	pol = pol.WithBrokerWaitThreshold(p.threshold).WithMaxAge(p.giveUp)
	if p.delays {
		pol = pol.WithDelayQueues(true)
	}
	return pol, nil
}

// describe says in a line what the policy is.
func (p *policyFlags) describe(pol retry.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d attempts (the first delivery and %d retries)", pol.MaxAttempts(), pol.MaxAttempts()-1)
	if pol.MaxAttempts() > 1 {
		if p.fixed {
			fmt.Fprintf(&b, ", %s apart", retry.FormatDelay(p.initial))
		} else {
			fmt.Fprintf(&b, ", exponential from %s", retry.FormatDelay(p.initial))
			if p.max > 0 {
				fmt.Fprintf(&b, " up to %s", retry.FormatDelay(p.max))
			}
		}
		switch {
		case pol.BrokerWaitThreshold() > 0 && p.delays:
			fmt.Fprintf(&b, "; waits of %s or more on the delay queues", retry.FormatDelay(pol.BrokerWaitThreshold()))
		case pol.BrokerWaitThreshold() > 0:
			fmt.Fprintf(&b, "; waits of %s or more on rungs in the broker", retry.FormatDelay(pol.BrokerWaitThreshold()))
		default:
			b.WriteString("; every wait in the process")
		}
	}
	if pol.MaxAge() > 0 {
		fmt.Fprintf(&b, "; gives up on messages older than %s", retry.FormatDelay(pol.MaxAge()))
	}
	return b.String()
}

// seconds writes d in seconds, the way the seeds write a ladder: 80s, 0.25s.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// queueArgs is a repeatable --arg key=value: the work queue's arguments,
// which must match the service's (a quorum queue's, say).
type queueArgs map[string]any

func (q queueArgs) String() string {
	parts := make([]string, 0, len(q))
	for k, v := range q {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, ",")
}

// Set reads key=value; a value that is an integer or true/false is declared
// as one, as RabbitMQ expects x-max-length=1000 to be a number.
func (q queueArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, e.g. x-queue-type=quorum")
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		q[k] = n
	} else if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		q[k] = b
	} else {
		q[k] = v
	}
	return nil
}

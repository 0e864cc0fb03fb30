package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
)

// scheduleWait is one wait of the ladder.
type scheduleWait struct {
	Attempt int     `json:"attempt"` // the attempt the wait comes before
	Delay   string  `json:"delay"`
	Seconds float64 `json:"seconds"`
	Where   string  `json:"where"` // "process", "broker" (a rung) or "delays" (the delay queues), as acemq.retry.scheduled says
	Rung    string  `json:"rung,omitempty"`
	Jitter  float64 `json:"jitter,omitempty"` // the ± fraction of a wait in the process or on the delay queues
}

type scheduleRung struct {
	Queue   string         `json:"queue"`
	Delay   string         `json:"delay"`
	Seconds float64        `json:"seconds"`
	Args    map[string]any `json:"args"`
}

type scheduleOut struct {
	Queue       string         `json:"queue"`
	MaxAttempts int            `json:"max_attempts"`
	Threshold   string         `json:"threshold"`
	GiveUpAfter string         `json:"give_up_after,omitempty"`
	DelayQueues bool           `json:"delay_queues"` // some wait is spent on the delay queues
	Waits       []scheduleWait `json:"waits"`
	Rungs       []scheduleRung `json:"rungs"`
}

// schedule prints the ladder a policy makes, to argue with five numbers
// rather than four parameters. It needs no broker.
func (a *app) schedule(args []string) int {
	fs, asJSON, _ := a.flags("schedule", "--queue Q --attempts N --initial D [--max D] [--fixed] [--threshold D] [--give-up-after D] [--on-delay-queues]",
		`Prints the waits of a retry policy, without jitter: one line per wait, with
the attempt it comes before, the delay, and where it is spent: held in the
process, on a rung queue in the broker (named exactly as consumers declare
it), or, with --on-delay-queues, on the delay queues (`+delay.Prefix+`.00 to
.27, one set per vhost, declared once: acemq topology --delays --apply). A wait on
the delay queues is jittered like one in the process, and rounded up to
`+delay.Unit.String()+`; it needs no rung. Needs no broker.

Examples:
  acemq schedule --queue shipping.orders --attempts 6 --initial 10s --max 10m --threshold 30s
  acemq schedule --queue shipping.orders --attempts 6 --initial 10s --max 10m --on-delay-queues
`, false)
	queue := fs.String("queue", "", "the work queue the policy is for (names the rungs)")
	var pf policyFlags
	pf.register(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	if *queue == "" {
		return a.usageError(fs, "--queue is required")
	}
	pol, err := pf.policy()
	if err != nil {
		return a.usageError(fs, "%v", err)
	}
	out := scheduleOut{Queue: *queue, MaxAttempts: pol.MaxAttempts(), Threshold: retry.FormatDelay(pol.BrokerWaitThreshold()), DelayQueues: pol.UsesDelayQueues(), Waits: []scheduleWait{}, Rungs: []scheduleRung{}}
	if pol.MaxAge() > 0 {
		out.GiveUpAfter = retry.FormatDelay(pol.MaxAge())
	}
	for i, step := range pol.Schedule() {
		d := step.Delay
		w := scheduleWait{Attempt: i + 2, Delay: retry.FormatDelay(d), Seconds: d.Seconds(), Where: "process", Jitter: pol.Jitter()}
		switch step.Where {
		case retry.OnRung:
			w.Where, w.Rung, w.Jitter = "broker", retry.RungName(*queue, d), 0
		case retry.OnDelayQueues:
			w.Where = "delays"
		}
		out.Waits = append(out.Waits, w)
	}
	for _, d := range pol.BrokerRungs() {
		out.Rungs = append(out.Rungs, scheduleRung{Queue: retry.RungName(*queue, d), Delay: retry.FormatDelay(d), Seconds: d.Seconds(), Args: retry.RungArgs(*queue, d)})
	}
	if *asJSON {
		a.printJSON(out)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "%s: %s\n", *queue, pf.describe(pol))
	if len(out.Waits) == 0 {
		fmt.Fprintln(a.stdout, "no retries: a message that asks for one is dead-lettered")
		return exitOK
	}
	fmt.Fprintln(a.stdout)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tWAIT\tSECONDS\tWHERE")
	var waits, rungs []string
	for i, step := range pol.Schedule() {
		d, w := step.Delay, out.Waits[i]
		var where string
		switch step.Where {
		case retry.OnRung:
			where = "rung " + w.Rung
		case retry.OnDelayQueues:
			where = "delay queues"
		default:
			where = "in process"
		}
		if w.Jitter > 0 {
			where += fmt.Sprintf(" (±%g%% jitter)", w.Jitter*100)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", w.Attempt, w.Delay, seconds(d), where)
		waits = append(waits, seconds(d))
	}
	_ = tw.Flush()
	for _, d := range pol.BrokerRungs() {
		rungs = append(rungs, seconds(d))
	}
	fmt.Fprintf(a.stdout, "\nwaits: %s\n", strings.Join(waits, " "))
	switch {
	case len(rungs) > 0:
		fmt.Fprintf(a.stdout, "rungs: %s\n", strings.Join(rungs, " "))
		fmt.Fprintln(a.stdout, "(a consumer declares the rungs at start-up; with declare off, run acemq topology with these flags and --apply)")
	case out.DelayQueues:
		fmt.Fprintf(a.stdout, "rungs: none (the waits of %s or more are spent on the delay queues %s.00 to .27)\n", out.Threshold, delay.Prefix)
		fmt.Fprintln(a.stdout, "(a consumer declares the delay queues at start-up, once per vhost; with declare off, run acemq topology with these flags and --apply)")
	default:
		fmt.Fprintln(a.stdout, "rungs: none (every wait is held in the process)")
	}
	return exitOK
}

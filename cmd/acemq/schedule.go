package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq/retry"
)

// scheduleWait is one wait of the ladder.
type scheduleWait struct {
	Attempt int     `json:"attempt"` // the attempt the wait comes before
	Delay   string  `json:"delay"`
	Seconds float64 `json:"seconds"`
	Where   string  `json:"where"` // "process" or "broker"
	Rung    string  `json:"rung,omitempty"`
	Jitter  float64 `json:"jitter,omitempty"` // the ± fraction of an in-process wait
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
	Waits       []scheduleWait `json:"waits"`
	Rungs       []scheduleRung `json:"rungs"`
}

// schedule prints the ladder a policy makes, to argue with five numbers
// rather than four parameters. It needs no broker.
func (a *app) schedule(args []string) int {
	fs, asJSON, _ := a.flags("schedule", "--queue Q --attempts N --initial D [--max D] [--fixed] [--threshold D] [--give-up-after D]",
		`Prints the waits of a retry policy, without jitter: one line per wait, with
the attempt it comes before, the delay, and whether it is held in the process
or spent on a rung queue in the broker (named exactly as consumers declare
it). Needs no broker.

Example:
  acemq schedule --queue shipping.orders --attempts 6 --initial 10s --max 10m --threshold 30s
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
	out := scheduleOut{Queue: *queue, MaxAttempts: pol.MaxAttempts(), Threshold: retry.FormatDelay(pol.Threshold()), Waits: []scheduleWait{}, Rungs: []scheduleRung{}}
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
		where := "in process"
		if w.Rung != "" {
			where = "rung " + w.Rung
		} else if w.Jitter > 0 {
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
	if len(rungs) == 0 {
		fmt.Fprintln(a.stdout, "rungs: none (every wait is held in the process)")
		return exitOK
	}
	fmt.Fprintf(a.stdout, "rungs: %s\n", strings.Join(rungs, " "))
	fmt.Fprintln(a.stdout, "(a consumer declares the rungs at start-up; with declare off, run acemq topology with these flags and --apply)")
	return exitOK
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

type replayOut struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Moved   int    `json:"moved"`
	Skipped int    `json:"skipped"`
	Stopped string `json:"stopped"`
	// Before is how many were ready in the source when replay began, and
	// Grew by how many more it took (moved and skipped) than that: the
	// source grew while it was read.
	Before int    `json:"before"`
	Grew   int    `json:"grew,omitempty"`
	Error  string `json:"error,omitempty"`
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// replay moves dead letters (or parked messages) back once the cause is
// fixed, and says how many and why it stopped.
func (a *app) replay(args []string) int {
	fs, asJSON, url := a.flags("replay", "--queue Q [--from dlq|parked] [--to QUEUE] [--limit N] [--deadline D] [--match REGEX] [--no-restart]",
		`Moves messages from Q.dlq (or Q.parked) back to Q, one at a time: each copy is
published to the queue by name and confirmed before its original is
acknowledged, so nothing is lost. The copy keeps its id and creation time; by
default it starts again at attempt 1 with no reason (--no-restart keeps both).
Messages the filters skip stay where they were, in their order.

It stops when the queue is drained, --limit messages have moved, or
--deadline has passed, and prints the counts and why:
  moved 137, skipped 363 (drained)
A copy that reaches no queue stops it with an error; that message stays.
Progress goes to stderr on long replays. Exit status 1 on an error.

Example:
  acemq replay --queue orders --from dlq --match 'warehouse' --limit 500
`, true)
	queue := fs.String("queue", "", "the work queue whose dead letters to replay (orders, not orders.dlq)")
	from := fs.String("from", "dlq", "where from: dlq (Q.dlq) or parked (Q.parked)")
	to := fs.String("to", "", "the queue to move them to (default: the --queue itself)")
	limit := fs.Int("limit", 0, "stop after moving this many (0: no limit)")
	deadline := fs.Duration("deadline", 0, "stop after this long, e.g. 5m (0: none)")
	match := fs.String("match", "", "move only messages whose reason (x-acemq-error) matches this regular expression")
	matchBody := fs.String("match-body", "", "move only messages whose body matches this regular expression")
	var ids listFlag
	fs.Var(&ids, "id", "move only the message with this x-acemq-id (repeatable)")
	noRestart := fs.Bool("no-restart", false, "keep the attempt and the reason as they are, instead of attempt 1 and no reason")
	every := fs.Duration("progress", 2*time.Second, "print progress to stderr this often (0: never)")
	management, spend := readFlags(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	if *queue == "" {
		return a.usageError(fs, "--queue is required")
	}
	source := map[string]string{"dlq": acemq.DeadLetterQueue(*queue), "parked": acemq.ParkedQueue(*queue)}[*from]
	if source == "" {
		return a.usageError(fs, "--from is dlq or parked, not %q", *from)
	}
	target := *queue
	if *to != "" {
		target = *to
	}
	if *limit < 0 || *deadline < 0 {
		return a.usageError(fs, "--limit and --deadline may not be negative")
	}
	filter, err := replayFilter(*match, *matchBody, ids)
	if err != nil {
		return a.usageError(fs, "%v", err)
	}
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()
	for _, q := range []string{source, target} {
		if _, err := t.Inspect(a.ctx, q); err != nil {
			if meant := meantQueue(*queue); q == source && meant != "" && errors.Is(err, transport.ErrNotFound) {
				return a.usageError(fs, "%s does not exist: --queue takes the work queue, not %s: did you mean %s?", source, *queue, meant)
			}
			return a.fail(fs, err)
		}
	}
	if code, ok := a.mayRead(fs, t, *management, *spend, source); !ok {
		return code
	}
	r, closeRead, code := a.openReadPath(fs, t)
	if r == nil {
		return code
	}
	defer closeRead()
	depth := 0 // for progress, and to tell whether the queue grew while it was read
	if info, err := t.Inspect(a.ctx, source); err == nil {
		depth = info.Messages
	}
	opts := acemq.ReplayOptions{To: target, Limit: *limit, Deadline: *deadline, Filter: filter, KeepAttempts: *noRestart}
	prog := a.newProgress(source+" -> "+target+":", depth, progressOf(*every, *asJSON))
	opts.Progress = func(r acemq.ReplayResult) {
		prog.note = r.String() + " so far"
		prog.set(r.Moved + r.Skipped)
	}
	res, err := acemq.Replay(a.ctx, r, source, opts)
	prog.stop()
	interrupted := a.ctx.Err() != nil && errors.Is(err, context.Canceled)
	grew := max(0, res.Moved+res.Skipped-depth)
	if *asJSON {
		out := replayOut{From: source, To: target, Moved: res.Moved, Skipped: res.Skipped, Stopped: string(res.Stopped), Before: depth, Grew: grew}
		if err != nil {
			out.Error = a.redact(explain(err))
		}
		a.printJSON(out)
	} else {
		fmt.Fprintln(a.stdout, res)
		if grew > 0 {
			fmt.Fprintf(a.stdout, "%s grew by %d while it was read (%d taken, %d ready when replay began: another reader gave messages back, or new ones came)\n",
				escape.String(source), grew, res.Moved+res.Skipped, depth)
		}
	}
	switch {
	case interrupted:
		// Left is the broker's count of the source, not one worked out.
		fmt.Fprintf(a.stderr, "interrupted: moved %d, left %s\n", res.Moved, countAfter(a.settle(t, source, res.Skipped)))
		return exitError
	case err != nil:
		return a.fail(fs, errors.New(explain(err)))
	case filter != nil && res.Moved == 0:
		return a.fail(fs, fmt.Errorf("the filter matched none of the %d messages read", res.Skipped))
	}
	return exitOK
}

// meantQueue is the command line meant when --queue names a .dlq or a
// .parked queue rather than its work queue; "" when it does not.
func meantQueue(queue string) string {
	for _, c := range []struct{ suffix, from string }{{".dlq", ""}, {".parked", " --from parked"}} {
		if q, ok := strings.CutSuffix(queue, c.suffix); ok && q != "" {
			return "--queue " + q + c.from
		}
	}
	return ""
}

// explain adds what to do to the errors an operator can fix.
func explain(err error) string {
	if errors.Is(err, acemq.ErrUnroutable) {
		return escapeErr(err) + " (is the target queue declared? acemq topology --apply declares it)"
	}
	return escapeErr(err)
}

// replayFilter builds the filter of --match, --match-body and --id; nil
// when none is given, so that every message moves.
func replayFilter(match, matchBody string, ids []string) (func(acemq.Envelope, []byte) bool, error) {
	var reason, body *regexp.Regexp
	var err error
	if match != "" {
		if reason, err = regexp.Compile(match); err != nil {
			return nil, fmt.Errorf("--match: %w", err)
		}
	}
	if matchBody != "" {
		if body, err = regexp.Compile(matchBody); err != nil {
			return nil, fmt.Errorf("--match-body: %w", err)
		}
	}
	if reason == nil && body == nil && len(ids) == 0 {
		return nil, nil
	}
	return func(env acemq.Envelope, b []byte) bool {
		return (reason == nil || reason.MatchString(env.Error)) &&
			(body == nil || body.Match(b)) &&
			(len(ids) == 0 || slices.Contains(ids, env.ID))
	}, nil
}

var _ flag.Value = (*listFlag)(nil)

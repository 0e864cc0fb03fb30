package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// triageGroup is a group as triage prints it.
type triageGroup struct {
	triage.Group
	SampleBody string `json:"sample_body"` // an excerpt, escaped
}

type triageOut struct {
	Queue  string        `json:"queue"`
	Depth  int           `json:"depth"` // ready messages when triage began
	Read   int           `json:"read"`
	Groups []triageGroup `json:"groups"`
	// Partitions are the queues read for a partitioned queue's
	// set-aside queue (triage_partitions.go), by index.
	Partitions []triageSource `json:"partitions,omitempty"`
}

// actionOut is what a replay or discard of a group did, counted as it
// happened: every figure is a count of messages the move took, moved or
// gave back, or one the broker gave, never one worked out from another, so
// none can be negative, and a queue that changed while it was read (another
// reader giving messages back, new dead letters) is said, not hidden.
type actionOut struct {
	Queue  string `json:"queue"`
	Group  string `json:"group"`
	Action string `json:"action"` // replay or discard
	To     string `json:"to"`     // a queue, or the archive file
	// Matched is how many of the group triage counted when it read the
	// queue; the move can find more (or fewer) if the queue changed since.
	Matched int `json:"matched"`
	// Moved is how many were moved: each counted once its copy was safe
	// and its original acknowledged.
	Moved int `json:"moved"`
	// Left is how many of the group are still in the queue as far as the
	// move knows: those it took and gave back, and, when it stopped before
	// the queue was empty (--limit, an error, an interruption), those
	// counted when read that it did not reach.
	Left int `json:"left"`
	// Taken is how many messages the move took from the queue, of the
	// group or not: a pass to the end takes every message then ready.
	Taken int `json:"taken"`
	// Grew is by how many messages the queue grew while it was read: how
	// many more the move took than were ready when triage began.
	Grew    int    `json:"grew,omitempty"`
	Before  int    `json:"before"` // ready when triage began
	After   int    `json:"after"`  // ready at the end, as the broker counts them
	Stopped string `json:"stopped"`
	// Interrupted: SIGINT, SIGTERM or SIGHUP stopped the move.
	Interrupted bool   `json:"interrupted,omitempty"`
	Error       string `json:"error,omitempty"`
	// Partitions, for a move over a partitioned queue's set-aside queues:
	// each partition's move that held some of the group, by index; the
	// counts above add them up (Before and After over those partitions).
	Partitions []actionOut `json:"partitions,omitempty"`
}

// Why a move stopped.
const (
	stoppedDrained     = "drained"     // nothing more in the queue
	stoppedLimit       = "limit"       // --limit reached
	stoppedInterrupted = "interrupted" // a signal
	stoppedError       = "error"
)

// account fills in what follows from the move's own counts, once it has
// ended: the group left behind, by how much the queue grew, and the
// broker's count of what is ready now (waiting, a few seconds at most, for
// what was given back to be requeued).
func (a *app) account(t transport.Transport, res *actionOut, givenBackOfGroup int) {
	res.Left = givenBackOfGroup
	if res.Stopped != stoppedDrained {
		res.Left += max(0, res.Matched-res.Moved-givenBackOfGroup)
	}
	res.Grew = max(0, res.Taken-res.Before)
	res.After = a.settle(t, res.Queue, res.Taken-res.Moved)
}

// triage reads a dead-letter or parked queue without taking anything,
// groups its messages by why they failed, and replays or archives a group.
func (a *app) triage(args []string) int {
	fs, asJSON, url := a.flags("triage", "Q.dlq [--replay GROUP | --discard GROUP --why TEXT (--to-file F.jsonl | --to-queue Q)] [flags]",
		`Reads every message of a queue (usually a .dlq or .parked one) as peek does,
holding them unacknowledged and giving all of them back, and groups them by
their reason with what varies between messages (ids, UUIDs, numbers, hex,
quoted values) taken out. Per group: how many, the attempts, the oldest and
newest creation (and broker dead-letter) time, a sample id and body. On a
quorum queue (not the default for .dlq and .parked) each read counts as a
delivery towards x-delivery-limit, as peek's do: it says what a read costs
before it reads, and refuses a queue whose delivery limit a read counts
against (or, not a .dlq, .parked or archive queue, whose limit cannot be
told) unless --spend-deliveries is given. It reads on a connection of its
own, which a message this client cannot read closes alone.

With --replay GROUP it moves that group's messages back to their queue, as
acemq replay does. With --discard GROUP it moves them into an archive, a JSON
lines file (--to-file: headers, properties, the body in base64) or a queue
(--to-queue, declared durable when missing), each with audit headers: who
(--operator), why (--why, required) and when. Each copy is written (the file
synced, the queue's publish confirmed) before its original is acknowledged.
It prints what it counted as it went: how many of the group it moved and
left, by how much the queue grew while it was read (another reader giving
messages back), and the broker's count before and after. A group that
matches nothing, an
error or an interruption (SIGINT, SIGTERM, SIGHUP: the message in flight is
finished, the rest stays) is exit status 1.

Examples:
  acemq triage orders.dlq
  acemq triage orders.dlq --replay g1c2e9a52
  acemq triage orders.dlq --discard g07b3f1d4 --why 'test orders from the load test' --to-file archive.jsonl
`, true)
	queue := fs.String("queue", "", "the queue to triage, by its full name (or as the first argument)")
	readN := fs.Int("read", 0, "read at most this many messages (0: every one ready when it begins)")
	excerpt := fs.Int("excerpt", 80, "bytes of the sample body to show")
	replayGroup := fs.String("replay", "", "move the messages of this group (its id, or its reason as printed) back to their queue")
	discardGroup := fs.String("discard", "", "move the messages of this group into an archive (--to-file or --to-queue)")
	to := fs.String("to", "", "with --replay: the queue to move them to (default: the queue of the .dlq or .parked)")
	toFile := fs.String("to-file", "", "with --discard: append them to this JSON lines file")
	toQueue := fs.String("to-queue", "", "with --discard: publish them to this queue")
	why := fs.String("why", "", "with --discard: why they are discarded, written on each (required)")
	operator := fs.String("operator", "", "with --discard: who discards them, written on each (default $USER, else the login user)")
	limit := fs.Int("limit", 0, "move at most this many (0: the whole group)")
	noRestart := fs.Bool("no-restart", false, "with --replay: keep the attempt and the reason")
	every := fs.Duration("progress", progressEvery, "progress on stderr this often (0: never)")
	management, spend := readFlags(fs)
	pos, code, done := a.parseInterspersed(fs, args)
	if done {
		return code
	}
	switch {
	case len(pos) > 1 || len(pos) == 1 && *queue != "":
		return a.usageError(fs, "one queue, not %q", strings.Join(pos, " "))
	case len(pos) == 1:
		*queue = pos[0]
	}
	switch {
	case *queue == "":
		return a.usageError(fs, "give the queue: acemq triage orders.dlq")
	case *replayGroup != "" && *discardGroup != "":
		return a.usageError(fs, "--replay or --discard, not both")
	case *readN < 0 || *limit < 0 || *excerpt < 0:
		return a.usageError(fs, "--read, --limit and --excerpt may not be negative")
	case *discardGroup != "" && (*toFile == "") == (*toQueue == ""):
		return a.usageError(fs, "--discard needs one archive: --to-file F.jsonl or --to-queue Q")
	case *discardGroup != "" && strings.TrimSpace(*why) == "":
		return a.usageError(fs, "--discard needs --why: it is written on every message archived")
	case *discardGroup == "" && (*toFile != "" || *toQueue != "" || *why != "" || *operator != ""):
		return a.usageError(fs, "--to-file, --to-queue, --why and --operator go with --discard")
	case *replayGroup == "" && (*to != "" || *noRestart):
		return a.usageError(fs, "--to and --no-restart go with --replay")
	case *toQueue != "" && *toQueue == *queue:
		return a.usageError(fs, "--to-queue is the queue being triaged")
	}
	if *operator == "" {
		*operator = a.getenv("USER")
	}
	if *operator == "" {
		if u, err := user.Current(); err == nil {
			*operator = u.Username
		}
	}
	if *discardGroup != "" && *operator == "" {
		return a.usageError(fs, "--discard needs --operator: $USER is not set")
	}
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()

	set, partitioned, err := a.triageSet(t, *queue)
	if err != nil {
		return a.fail(fs, err)
	}
	if *toQueue != "" && slices.Contains(set, *toQueue) {
		return a.usageError(fs, "--to-queue is a queue being triaged")
	}
	depths := make([]int, len(set))
	for i, q := range set {
		if code, ok := a.mayRead(fs, t, *management, *spend, q); !ok {
			return code
		}
		info, err := t.Inspect(a.ctx, q)
		if err != nil {
			return a.fail(fs, err)
		}
		depths[i] = info.Messages
	}
	r, closeRead, code := a.openReadPath(fs, t)
	if r == nil {
		return code
	}
	defer closeRead()
	t = r
	sel := *replayGroup + *discardGroup
	out, err := a.scanSet(t, *queue, set, depths, partitioned, *readN, *excerpt, *every, *asJSON)
	if err != nil && a.ctx.Err() != nil {
		fmt.Fprintf(a.stderr, "interrupted: read %d of %d, moved 0 (all given back)\n", out.Read, out.Depth)
		return exitError
	}
	if err != nil {
		return a.fail(fs, err)
	}
	if sel == "" {
		if *asJSON {
			a.printJSON(out)
		} else {
			a.printTriage(out)
		}
		return exitOK
	}
	matched := 0
	var group triageGroup
	for _, g := range out.Groups {
		if g.ID == sel || g.Key == sel {
			matched, group = g.Count, g
		}
	}
	if matched == 0 {
		return a.fail(fs, fmt.Errorf("no message of the %d read in %s is in group %q (acemq triage %s lists the groups)", out.Read, *queue, escape.String(sel), *queue))
	}
	if partitioned {
		return a.triageMoveSet(fs, t, out, group, sel, setFlags{replay: *replayGroup != "", to: *to, toFile: *toFile, toQueue: *toQueue,
			operator: *operator, why: *why, limit: *limit, keep: *noRestart, every: progressOf(*every, *asJSON), asJSON: *asJSON})
	}
	a.settle(t, *queue, out.Depth)
	res := actionOut{Queue: *queue, Group: sel, Matched: matched, Before: out.Depth}
	want := matched
	if *limit > 0 {
		want = min(want, *limit)
	}
	if *replayGroup != "" {
		err = a.triageReplay(t, &res, *to, want, *limit, *noRestart, progressOf(*every, *asJSON))
	} else {
		var arch archive
		if arch, err = a.openArchive(t, *toFile, *toQueue, *queue, sel, *operator, *why); err == nil {
			res.Action, res.To = "discard", arch.name()
			err = a.triageDiscard(t, &res, arch, want, *limit, progressOf(*every, *asJSON))
			if cerr := arch.close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	res.Interrupted = a.ctx.Err() != nil
	if err != nil && res.Stopped == "" { // the move did not start
		res.Stopped, res.After = stoppedError, a.settle(t, res.Queue, 0)
	}
	if err != nil {
		res.Error = a.redact(escape.String(err.Error()))
	}
	if *asJSON {
		a.printJSON(res)
	} else {
		a.printAction(res)
	}
	switch {
	case res.Interrupted:
		fmt.Fprintf(a.stderr, "interrupted: moved %d, left %d\n", res.Moved, res.Left)
		return exitError
	case err != nil:
		return a.fail(fs, errors.New(res.Error))
	}
	return exitOK
}

// parseInterspersed is a.parse for a command that takes arguments among
// its flags (acemq triage --url U orders.dlq --json), returned in order.
func (a *app) parseInterspersed(fs *flag.FlagSet, args []string) (pos []string, code int, done bool) {
	for {
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		fs.SetOutput(a.stderr)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(a.stdout)
			fs.Usage()
			return nil, exitOK, true
		case err != nil:
			fmt.Fprintln(a.stderr, a.redact(err.Error()))
			fs.Usage()
			return nil, exitUsage, true
		case fs.NArg() == 0:
			return pos, 0, false
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func progressOf(every time.Duration, asJSON bool) time.Duration {
	if asJSON {
		return 0
	}
	return every
}

// scan reads up to limit messages (all depth of them when limit is 0),
// groups them, and gives them all back.
func (a *app) scan(t transport.Transport, queue string, depth, limit, excerpt int, every time.Duration, asJSON bool) (triageOut, error) {
	return a.scanSet(t, queue, []string{queue}, []int{depth}, false, limit, excerpt, every, asJSON)
}

// settle waits, up to a few seconds, until queue shows at least depth
// ready messages, and returns how many it shows: what a read gave back is
// requeued by the broker after the give-back is sent, and a take (or a
// count) before that would miss it. It returns the last count it got
// (0 when it could get none).
func (a *app) settle(t transport.Transport, queue string, depth int) int {
	last := 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := t.Inspect(context.WithoutCancel(a.ctx), queue)
		if err == nil {
			last = info.Messages
		}
		if err != nil || info.Messages >= depth || !time.Now().Before(deadline) {
			return last
		}
	}
}

// deadLettered is when the broker last dead-lettered a message: the time
// of the newest x-death entry.
func deadLettered(h map[string]any) time.Time {
	deaths, ok := h["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		return time.Time{}
	}
	if d, ok := deaths[0].(map[string]any); ok {
		if t, ok := wire.Time(d["time"]); ok {
			return t
		}
	}
	return time.Time{}
}

const stamp = "2006-01-02 15:04:05Z"

func (a *app) printTriage(out triageOut) {
	if out.Partitions != nil {
		queues := make([]string, len(out.Partitions))
		for i, p := range out.Partitions {
			queues[i] = p.Queue
		}
		fmt.Fprintf(a.stdout, "%s: %s (%s), %d ready, read %d in %d groups (none consumed)\n", escape.String(out.Queue), plural(len(queues), "partition"), setLabel(queues),
			out.Depth, out.Read, len(out.Groups))
	} else {
		fmt.Fprintf(a.stdout, "%s: %d ready, read %d in %d groups (none consumed)\n", out.Queue, out.Depth, out.Read, len(out.Groups))
	}
	for _, g := range out.Groups {
		attempts := fmt.Sprint(g.MinAttempt)
		if g.MaxAttempt != g.MinAttempt {
			attempts += "-" + fmt.Sprint(g.MaxAttempt)
		}
		fmt.Fprintf(a.stdout, "\n%s  %s  %s  attempts %s\n  reason:  %s\n", g.ID, countOf(g.Count), g.Kind, attempts, escape.String(g.Key))
		if len(g.Queues) > 0 {
			in := make([]string, len(g.Queues))
			for i, c := range g.Queues {
				in[i] = fmt.Sprintf("%s %d", escape.String(c.Queue), c.Count)
			}
			fmt.Fprintf(a.stdout, "  in:      %s\n", strings.Join(in, ", "))
		}
		if g.FirstCreated != nil {
			fmt.Fprintf(a.stdout, "  created: %s .. %s\n", g.FirstCreated.Format(stamp), g.LastCreated.Format(stamp))
		}
		if g.FirstDeadLettered != nil {
			fmt.Fprintf(a.stdout, "  dead-lettered by the broker: %s .. %s\n", g.FirstDeadLettered.Format(stamp), g.LastDeadLettered.Format(stamp))
		}
		sample := escape.String(orDash(g.SampleID))
		if g.SampleQueue != "" {
			sample += " in " + escape.String(g.SampleQueue)
		}
		fmt.Fprintf(a.stdout, "  sample:  %s  %s\n", sample, g.SampleBody)
	}
	if len(out.Groups) > 0 {
		fmt.Fprintf(a.stdout, "\nact on a group: acemq triage %s --replay GROUP, or --discard GROUP --why TEXT --to-file F.jsonl\n", out.Queue)
	}
}

func (a *app) printAction(r actionOut) {
	verb := "replayed to"
	if r.Action == "discard" {
		verb = "archived in"
	}
	fmt.Fprintf(a.stdout, "%s: group %s, %s when read: %d %s %s, %d left\n", r.Queue, escape.String(r.Group), countOf(r.Matched), r.Moved, verb, escape.String(r.To), r.Left)
	if r.Grew > 0 || r.Moved > r.Matched {
		fmt.Fprintf(a.stdout, "%s: the queue grew by %d while it was read (%d taken, %d ready when triage began: another reader gave messages back, or new ones came); every one moved was of the group\n",
			r.Queue, r.Grew, r.Taken, r.Before)
	}
	if gone := r.Matched - r.Moved - r.Left; r.Stopped == stoppedDrained && gone > 0 {
		fmt.Fprintf(a.stdout, "%s: %d of the group counted when read were no longer there: another reader took them meanwhile\n", r.Queue, gone)
	}
	fmt.Fprintf(a.stdout, "%s: %s ready before, %d after\n", r.Queue, countOf(r.Before), r.After)
}

func countOf(n int) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

// triageReplay moves want messages of the group back, with acemq.Replay,
// and counts what it did (account).
func (a *app) triageReplay(t transport.Transport, res *actionOut, to string, want, limit int, keep bool, every time.Duration) (err error) {
	res.Action = "replay"
	target := to
	if target == "" {
		q, ok := queueOf(res.Queue)
		if !ok {
			return fmt.Errorf("%s is neither a .dlq nor a .parked queue: give --to", res.Queue)
		}
		target = q
	}
	res.To = target
	if _, err := t.Inspect(a.ctx, target); err != nil {
		return err
	}
	prog := a.newProgress(res.Queue+" -> "+target+": moved", want, every)
	defer prog.stop()
	sel := res.Group
	r, err := acemq.Replay(a.ctx, t, res.Queue, acemq.ReplayOptions{To: target, Limit: limit, KeepAttempts: keep,
		Filter:   func(env acemq.Envelope, _ []byte) bool { return triage.Matches(sel, env.Error) },
		Progress: func(r acemq.ReplayResult) { prog.set(r.Moved) }})
	res.Moved, res.Taken = r.Moved, r.Moved+r.Skipped
	switch {
	case a.ctx.Err() != nil && err != nil && errors.Is(err, context.Canceled):
		res.Stopped, err = stoppedInterrupted, nil // said as interrupted
	case err != nil:
		res.Stopped = stoppedError
	case r.Stopped == acemq.ReplayDrained:
		res.Stopped = stoppedDrained
	default:
		res.Stopped = stoppedLimit
	}
	a.account(t, res, 0) // Replay gives back only what its filter skips: none of the group
	return err
}

// queueOf is the queue a .dlq or .parked queue belongs to.
func queueOf(setAside string) (string, bool) {
	for _, suffix := range []string{acemq.DeadLetterQueue(""), acemq.ParkedQueue("")} {
		if q, ok := strings.CutSuffix(setAside, suffix); ok && q != "" {
			return q, true
		}
	}
	return "", false
}

// triageDiscard moves want messages of the group into arch, one at a time:
// each is in the archive (written and synced, or confirmed) before its
// original is acknowledged. The others are held and given back at the end,
// in their order, as a replay does. It counts what it did (account): each
// message taken, each moved, each of the group given back.
func (a *app) triageDiscard(t transport.Transport, res *actionOut, arch archive, want, limit int, every time.Duration) (err error) {
	prog := a.newProgress(res.Queue+" -> "+arch.name()+": moved", want, every)
	defer prog.stop()
	var held []transport.Delivery
	ofGroup := 0 // of held, those of the group
	defer func() {
		for _, d := range held {
			_ = d.Reject(true)
		}
		a.account(t, res, ofGroup)
	}()
	res.Stopped = stoppedLimit
	for limit <= 0 || res.Moved < limit {
		if a.ctx.Err() != nil {
			res.Stopped = stoppedInterrupted
			return nil // said as interrupted
		}
		// Not cancelled: a message taken is always either moved or held.
		d, ok, err := t.Get(context.WithoutCancel(a.ctx), res.Queue)
		if err != nil {
			res.Stopped = stoppedError
			return err
		}
		if !ok {
			res.Stopped = stoppedDrained
			return nil
		}
		res.Taken++
		if !triage.Matches(res.Group, acemq.EnvelopeOf(d).Error) {
			held = append(held, d)
			continue
		}
		if err := arch.keep(d); err != nil {
			held = append(held, d)
			ofGroup++
			res.Stopped = stoppedError
			return fmt.Errorf("archive %s: %w; the message is still in %s", arch.name(), err, res.Queue)
		}
		if err := d.Ack(); err != nil {
			res.Stopped = stoppedError
			return fmt.Errorf("message %s is in %s but could not be acknowledged, so it is in %s too: %w", acemq.EnvelopeOf(d).ID, arch.name(), res.Queue, err)
		}
		res.Moved++
		prog.set(res.Moved)
	}
	return nil
}

package main

import (
	"fmt"
	"os/user"
	"slices"
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

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
	f := moveFlags{replay: *replayGroup != "", to: *to, toFile: *toFile, toQueue: *toQueue,
		operator: *operator, why: *why, limit: *limit, keep: *noRestart, every: progressOf(*every, *asJSON), asJSON: *asJSON}
	if partitioned {
		return a.triageMoveSet(fs, t, out, group, sel, f)
	}
	res := actionOut{Queue: *queue, Group: sel, Matched: matched, Before: out.Depth}
	err = a.moveGroup(t, &res, f, f.limit)
	return a.moveDone(fs, res, err, f.asJSON, a.printAction)
}

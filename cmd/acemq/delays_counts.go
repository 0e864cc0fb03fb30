package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/delay"
)

// countUnseen fills in, from the management API at flagValue (else
// $ACEMQ_MANAGEMENT_URL, else the broker's host), what a passive declare
// cannot see on the delay queues: each level's messages waiting to be
// dead-lettered (messages_dlx: the level below full, or its exchange
// missing) and unacked ones, and which of the layout's exchanges are
// missing. When the API cannot be read it says so in out.Unseen, never
// with a zero. It returns false, with the exit status, only on a usage
// error or an interruption.
func (a *app) countUnseen(fs *flag.FlagSet, flagValue string, out *delaysOut) (int, bool) {
	defer out.addUp()
	mc, err := a.managementFor(fs, flagValue)
	if err != nil {
		return a.usageError(fs, "%v", err), false
	}
	out.Management = mc.String()
	uri, err := amqp.ParseURI(a.url)
	if err != nil {
		return a.usageError(fs, "the broker URL: %v", err), false
	}
	listed, err := mc.queues(a.ctx, uri.Vhost)
	var exchanges []string
	if err == nil {
		exchanges, err = mc.exchanges(a.ctx, uri.Vhost)
	}
	if err != nil {
		if a.ctx.Err() != nil {
			return a.fail(fs, err), false
		}
		if mc.base.Scheme == "https" {
			err = a.explainTLS(fs, mc.base.String(), err)
		}
		out.ManagementError = a.redact(err.Error())
		var me *mgmtError
		if errors.As(err, &me) && strings.HasPrefix(me.what, "the management plugin is not reachable") {
			out.ManagementError += ": enable it with rabbitmq-plugins enable rabbitmq_management"
		}
		out.Unseen = "messages waiting to be dead-lettered and unacked ones cannot be seen without the management API (" + out.ManagementError +
			"), so a level that shows 0 may still hold messages"
		return exitOK, true
	}
	byName := make(map[string]mgmtQueue, len(listed))
	for _, q := range listed {
		byName[q.Name] = q
	}
	unsampled := 0
	for _, q := range append(ptrs(out.Levels), &out.Undeliverable) {
		if q.Missing {
			continue
		}
		m, ok := byName[q.Queue]
		// Declared after the listing, or since the last sample; or a
		// quorum queue sampled without its messages_dlx yet (a loaded
		// broker reports it a sample later): its count is unknown, not 0.
		if !ok || !m.sampled() || (m.Type == "quorum" && m.DeadLettering == nil) {
			q.NotSampledYet = true
			unsampled++
			continue
		}
		q.Unacked, q.DeadLettering = m.Unacked, m.DeadLettering
		if q.DeadLettering == nil && m.Type == "classic" {
			zero := 0 // a classic queue dead-letters at most once: it holds nothing back
			q.DeadLettering = &zero
		}
	}
	if unsampled > 0 {
		out.Unseen = fmt.Sprintf("the management API has not sampled %s yet (declared in the last few seconds), so "+
			"their messages waiting to be dead-lettered and unacked ones are not known: run delays again in a few seconds", plural(unsampled, "delay queue"))
	}
	for _, x := range delay.Exchanges() {
		if !slices.Contains(exchanges, x) {
			out.MissingExchanges = append(out.MissingExchanges, x)
		}
	}
	return exitOK, true
}

// addUp totals what was counted: Waiting (ready on the levels),
// DeadLettering and Unacked (every queue of the layout; nil when one of
// them was not seen) and Total (every count seen).
func (out *delaysOut) addUp() {
	out.Waiting, out.Total = 0, 0
	var dl, un int
	dlSeen, unSeen := true, true
	for _, q := range append(ptrs(out.Levels), &out.Undeliverable) {
		if q.Missing {
			continue
		}
		if q.Level != nil {
			out.Waiting += q.Messages
		}
		out.Total += q.Messages
		if q.DeadLettering == nil {
			dlSeen = false
		} else {
			dl += *q.DeadLettering
			out.Total += *q.DeadLettering
		}
		if q.Unacked == nil {
			unSeen = false
		} else {
			un += *q.Unacked
			out.Total += *q.Unacked
		}
	}
	out.DeadLettering, out.Unacked = nil, nil
	if dlSeen {
		out.DeadLettering = &dl
	}
	if unSeen {
		out.Unacked = &un
	}
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// printCounts writes the headline of acemq delays: every count, and what
// could not be seen.
func (a *app) printCounts(on string, out delaysOut) {
	fmt.Fprintf(a.stdout, "%s on %s: %d waiting", delay.Prefix, on, out.Waiting)
	if out.DeadLettering != nil {
		fmt.Fprintf(a.stdout, ", %d waiting to be dead-lettered", *out.DeadLettering)
	}
	if out.Unacked != nil && *out.Unacked > 0 {
		fmt.Fprintf(a.stdout, ", %d unacked", *out.Unacked)
	}
	fmt.Fprintf(a.stdout, ", %d undeliverable", out.Undeliverable.Messages)
	if out.Unseen != "" {
		fmt.Fprintf(a.stdout, ": at least %d in all\n%s\n\n", out.Total, out.Unseen)
		return
	}
	fmt.Fprintf(a.stdout, ": %d in all\n\n", out.Total)
}

// printHeld explains the messages waiting to be dead-lettered, and the
// missing exchanges, under the table.
func (a *app) printHeld(out delaysOut) {
	if len(out.MissingExchanges) > 0 {
		fmt.Fprintf(a.stdout, "\nmissing exchanges: %s. A delayed publish to a missing level is refused, and what the level above dead-letters into it waits there, neither ready nor unacked; declare them with: acemq topology --delays --apply\n",
			strings.Join(out.MissingExchanges, ", "))
	}
	if out.DeadLettering == nil || *out.DeadLettering == 0 {
		return
	}
	var on []string
	for _, q := range out.Levels {
		if q.DeadLettering != nil && *q.DeadLettering > 0 {
			on = append(on, fmt.Sprintf("%s (%d)", q.Queue, *q.DeadLettering))
		}
	}
	fmt.Fprintf(a.stdout, "\n%d waiting to be dead-lettered on %s: they are due to move down a level, but the level below is full (a max-length policy) "+
		"or its exchange is missing, so the level keeps them, neither ready nor unacked, and RabbitMQ offers them again about every 3 minutes. "+
		"They are not lost; they are late. Never delete a delay queue that is not empty by every count.\n", *out.DeadLettering, strings.Join(on, ", "))
}

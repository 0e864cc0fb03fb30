package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// Roles of a queue in acemq's family.
const (
	roleWork          = "work"
	roleDLQ           = "dlq"
	roleParked        = "parked"
	roleRung          = "rung"
	roleDelayLevel    = "delay level"
	roleUndeliverable = "undeliverable"
	// roleBreaker is a breaker marker (Q.breaker.<instance>, breaker_mark.go):
	// its arguments make it one, not its name, so classify, which reads
	// names, never says it; fromManagement does. A marker is no row of
	// its own: it is its queue's service's Breakers.
	roleBreaker = "breaker marker"
)

// queueStat is one queue as status shows it. What the source does not
// report is absent (nil): a passive declare gives ready messages and
// consumers only, and the management API gives no count of a queue it has
// not sampled yet (NotSampledYet).
type queueStat struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Missing bool   `json:"missing,omitempty"` // named, or implied by its family, and not there
	Type    string `json:"type,omitempty"`    // classic, quorum, stream
	State   string `json:"state,omitempty"`   // running, idle, down...
	// NotSampledYet: the management API lists the queue but has not
	// sampled its counts yet (a queue declared in the last few seconds):
	// its counts are unknown, not zero.
	NotSampledYet bool `json:"not_sampled_yet,omitempty"`
	Messages      *int `json:"messages,omitempty"`
	Ready         *int `json:"ready,omitempty"`
	Unacked       *int `json:"unacked,omitempty"`
	// DeadLettering is a quorum queue's messages waiting to be
	// dead-lettered (the management API's messages_dlx): neither ready nor
	// unacked, held until their dead-letter target takes them.
	DeadLettering *int     `json:"dead_lettering,omitempty"`
	Consumers     *int     `json:"consumers,omitempty"`
	PublishRate   *float64 `json:"publish_per_second,omitempty"`
	DeliverRate   *float64 `json:"deliver_per_second,omitempty"`
	// Node is the node the queue is on (a quorum queue's leader).
	Node string `json:"node,omitempty"`
	// SingleActiveConsumer: declared with x-single-active-consumer, as an
	// ordered queue is; ActiveConsumer is the tag of the consumer that
	// receives, when the management API says.
	SingleActiveConsumer bool   `json:"single_active_consumer,omitempty"`
	ActiveConsumer       string `json:"active_consumer,omitempty"`
	rungWait             time.Duration
	breaker              *breakerMark // the marker's state, when the queue is a breaker marker
}

// service is a work queue and what acemq declares beside it.
type service struct {
	Queue  string      `json:"queue"`
	Queues []queueStat `json:"queues,omitempty"` // Q first, then Q.dlq, Q.parked, the rungs by wait; none for a partitioned queue
	// Breakers are Q's circuit breakers that are not closed, one per
	// server instance, by instance, from their markers.
	Breakers []breakerMark `json:"breakers,omitempty"`
	// Partitions are a partitioned queue's partitions, Q.p0 .. Q.p{n-1}
	// (foldPartitions says when names are a set), each a service of its
	// own, by index; Totals adds up their lines.
	Partitions []partition      `json:"partitions,omitempty"`
	Totals     *partitionCounts `json:"totals,omitempty"`
}

type statusOut struct {
	Vhost           string `json:"vhost"`
	Source          string `json:"source"` // "management API" or "passive declares"
	Management      string `json:"management"`
	ManagementError string `json:"management_error,omitempty"`
	// Unseen says which counts the source cannot give (passive declares
	// give no unacked messages, nor those waiting to be dead-lettered):
	// a queue shown with none of them may still hold messages.
	Unseen   string      `json:"unseen,omitempty"`
	Services []service   `json:"services"`
	Delays   []queueStat `json:"delay_queues,omitempty"`
	Other    []string    `json:"other_queues,omitempty"` // in the vhost, not acemq's
}

// status shows every acemq queue of a vhost: the management API lists
// them; without it only the queues named can be looked at, by passive
// declare.
func (a *app) status(args []string) int {
	fs, asJSON, url := a.flags("status", "[--queue Q]... [--management URL] [--url URL]",
		`Shows every acemq queue of the vhost, grouped by service: each work queue Q
(a queue with Q.dlq or Q.parked beside it), then Q.dlq, Q.parked and its
rungs (Q.retry.<delay>), and the delay queues (acemq.delay.v1.*): messages,
ready and unacked, consumers, and publish and deliver rates.
A breaker open or half-open (its marker Q.breaker.<instance>) shows under Q.

AMQP cannot list queues; RabbitMQ's management plugin can, and status reads
its HTTP API (GET /api/queues/{vhost}) at --management, by default the
broker's host on port 15672 (https on 15671 for amqps://) with the URL's
user, who needs the monitoring (or management) tag. Its numbers are its
last sample, a few seconds old. When it is not reachable status says so and
shows only the queues named with --queue (each with its .dlq and .parked,
and the delay queues), by passive declare: ready messages and consumers.
With --queue and the API, only those services are shown.

Example:
  acemq status
  acemq status --queue orders --queue payments --json
`, true)
	var queues listFlag
	fs.Var(&queues, "queue", "a work queue (orders) or any queue of its family to show (repeatable; all of them by default)")
	management := fs.String("management", "", "the management API, http://host:15672 (default: the broker's host, or $"+EnvManagement+")")
	if code, done := a.parse(fs, args); done {
		return code
	}
	rawURL := *url
	if rawURL == "" {
		rawURL = a.getenv(EnvURL)
	}
	if rawURL == "" {
		return a.usageError(fs, "no broker: give --url or set $%s", EnvURL)
	}
	a.url = rawURL
	if err := amqpconn.CheckURL(rawURL); err != nil {
		return a.usageError(fs, "the broker URL: %v", err)
	}
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return a.usageError(fs, "the broker URL: %v", err)
	}
	mc, err := a.managementFor(fs, *management)
	if err != nil {
		return a.usageError(fs, "%v", err)
	}
	out := statusOut{Vhost: uri.Vhost, Management: mc.String()}
	listed, err := mc.queues(a.ctx, uri.Vhost)
	if err == nil {
		out.Source = "management API"
		out.Services, out.Delays, out.Other = a.fromListing(listed, queues)
		return a.printStatus(out, *asJSON)
	}
	if a.ctx.Err() != nil {
		return a.fail(fs, err)
	}
	if mc.base.Scheme == "https" {
		err = a.explainTLS(fs, mc.base.String(), err)
	}
	out.Source, out.ManagementError = "passive declares", a.redact(err.Error())
	out.Unseen = unseenByDeclare
	var me *mgmtError
	if errors.As(err, &me) && strings.HasPrefix(me.what, "the management plugin is not reachable") {
		out.ManagementError += ": enable it with rabbitmq-plugins enable rabbitmq_management"
	}
	if len(queues) == 0 {
		fmt.Fprintf(a.stderr, "%s: %s; name the queues to show with --queue (AMQP cannot list them)\n", fs.Name(), out.ManagementError)
		return exitError
	}
	fmt.Fprintf(a.stderr, "%s: %s; showing only the queues named\n", fs.Name(), out.ManagementError)
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()
	stats, err := a.inspectNamed(t, queues)
	if err != nil {
		return a.fail(fs, err)
	}
	out.Services, out.Delays, _ = group(stats, nil)
	return a.printStatus(out, *asJSON)
}

// unseenByDeclare is what a passive declare cannot see.
const unseenByDeclare = "unacked messages and messages waiting to be dead-lettered (a quorum queue's messages_dlx) cannot be seen without the management API: a queue with 0 ready may still hold messages; " +
	"nor can circuit breaker markers (exclusive queues): an open breaker is not shown"

// fromListing is the management API's listing as services, delay queues
// and other queues, with only's services (all when it is empty) and those
// named and not there shown missing; breakers' reasons redacted.
func (a *app) fromListing(listed []mgmtQueue, only []string) ([]service, []queueStat, []string) {
	stats := make([]queueStat, 0, len(listed))
	for _, q := range listed {
		stats = append(stats, fromManagement(q))
	}
	services, delays, other := group(stats, only)
	services = withMissing(services, only)
	redactBreakers(services, a.redact)
	return services, delays, other
}

func fromManagement(q mgmtQueue) queueStat {
	s := queueStat{Name: q.Name, Type: q.Type, State: q.State, NotSampledYet: !q.sampled(),
		Messages: q.Messages, Ready: q.Ready, Unacked: q.Unacked, DeadLettering: q.DeadLettering, Consumers: q.Consumers,
		Node: cmp.Or(q.Leader, q.Node), SingleActiveConsumer: q.singleActive(), ActiveConsumer: q.activeConsumer()}
	if m, ok := markerOf(q); ok {
		s.Role, s.breaker = roleBreaker, &m
		return s
	}
	if s.DeadLettering == nil && q.Type == "classic" && q.sampled() {
		zero := 0 // a classic queue dead-letters at most once: it holds nothing back
		s.DeadLettering = &zero
	}
	if q.Stats != nil {
		if q.Stats.Publish != nil {
			s.PublishRate = &q.Stats.Publish.Rate
		}
		if q.Stats.DeliverGet != nil {
			s.DeliverRate = &q.Stats.DeliverGet.Rate
		}
	}
	return s
}

// inspectNamed looks at each named queue's family (Q, Q.dlq, Q.parked,
// and a rung when one is named) and at the delay queues, by passive
// declare; what is not there is marked missing.
func (a *app) inspectNamed(t transport.Transport, named []string) ([]queueStat, error) {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range named {
		q, role, _ := classify(n)
		if role == roleDelayLevel || role == roleUndeliverable || q == "" {
			continue // the delay queues are looked at in any case
		}
		add(q)
		add(acemq.DeadLetterQueue(q))
		add(acemq.ParkedQueue(q))
		if role == roleRung {
			add(n)
		}
	}
	var stats []queueStat
	look := func(n string) (bool, error) {
		info, err := t.Inspect(a.ctx, n)
		if errors.Is(err, transport.ErrNotFound) {
			stats = append(stats, queueStat{Name: n, Missing: true})
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ready, consumers := info.Messages, info.Consumers
		stats = append(stats, queueStat{Name: n, Ready: &ready, Consumers: &consumers})
		return true, nil
	}
	for _, n := range names {
		if _, err := look(n); err != nil {
			return nil, err
		}
	}
	if err := lookPartitions(&stats, look); err != nil {
		return nil, err
	}
	if there, err := look(delay.Undeliverable); err != nil {
		return nil, err
	} else if !there {
		stats = stats[:len(stats)-1] // no delay queues here: nothing to say
		return stats, nil
	}
	for k := range delay.Levels {
		if _, err := look(delay.Level(k)); err != nil {
			return nil, err
		}
	}
	return stats, nil
}

// classify says which service a queue name belongs to and as what: a
// rung is Q.retry.<delay> with the delay as rung names write it. A name
// that is none of the family's is its own work queue (role work), if the
// list shows it has a family; group decides that.
func classify(name string) (queue, role string, wait time.Duration) {
	switch {
	case name == delay.Undeliverable:
		return "", roleUndeliverable, 0
	case strings.HasPrefix(name, delay.Prefix+"."):
		return "", roleDelayLevel, 0
	case strings.HasSuffix(name, ".dlq") && len(name) > len(".dlq"):
		return strings.TrimSuffix(name, ".dlq"), roleDLQ, 0
	case strings.HasSuffix(name, ".parked") && len(name) > len(".parked"):
		return strings.TrimSuffix(name, ".parked"), roleParked, 0
	}
	if i := strings.LastIndex(name, ".retry."); i > 0 {
		s := name[i+len(".retry."):]
		if d, err := time.ParseDuration(s); err == nil && d > 0 && retry.FormatDelay(d) == s {
			return name[:i], roleRung, d
		}
	}
	return name, roleWork, 0
}

// group sorts queues into services (a work queue with a .dlq or .parked
// beside it, or a .dlq, .parked or rung whose work queue is missing, or a
// queue with a breaker marker), the delay queues, and the others. With
// only, just the services of the queues it names. A breaker marker is no
// row: it is its queue's service's Breakers, and a service of a queue the
// listing has nothing else of shows Q, Q.dlq and Q.parked missing.
func group(queues []queueStat, only []string) ([]service, []queueStat, []string) {
	present := map[string]bool{}
	breakers := map[string][]breakerMark{}
	for _, q := range queues {
		switch {
		case q.breaker != nil:
			breakers[q.breaker.queue] = append(breakers[q.breaker.queue], *q.breaker)
		case !q.Missing:
			present[q.Name] = true
		}
	}
	byQueue := map[string]*service{}
	var delays []queueStat
	var others []queueStat
	for _, q := range queues {
		if q.breaker != nil {
			continue
		}
		owner, role, wait := classify(q.Name)
		q.Role, q.rungWait = role, wait
		switch {
		case role == roleDelayLevel || role == roleUndeliverable:
			delays = append(delays, q)
			continue
		case role == roleWork && !present[acemq.DeadLetterQueue(q.Name)] && !present[acemq.ParkedQueue(q.Name)] && !hasFamily(queues, q.Name) && breakers[q.Name] == nil:
			others = append(others, q)
			continue
		}
		s := byQueue[owner]
		if s == nil {
			s = &service{Queue: owner}
			byQueue[owner] = s
		}
		s.Queues = append(s.Queues, q)
	}
	for owner, marks := range breakers {
		s := byQueue[owner]
		if s == nil {
			s = &missingService(owner)[0]
			byQueue[owner] = s
		}
		slices.SortFunc(marks, func(a, b breakerMark) int {
			return cmp.Or(strings.Compare(a.Instance, b.Instance), strings.Compare(a.Marker, b.Marker))
		})
		s.Breakers = marks
	}
	var services []service
	for name, s := range byQueue {
		if !slices.ContainsFunc(s.Queues, func(q queueStat) bool { return q.Role == roleWork }) {
			s.Queues = append(s.Queues, queueStat{Name: name, Role: roleWork, Missing: true})
		}
		slices.SortFunc(s.Queues, func(a, b queueStat) int {
			if c := roleRank[a.Role] - roleRank[b.Role]; c != 0 {
				return c
			}
			return int(a.rungWait - b.rungWait)
		})
		services = append(services, *s)
	}
	services, others = foldPartitions(services, others)
	var other []string
	for _, q := range others {
		other = append(other, q.Name)
	}
	if len(only) > 0 {
		services = slices.DeleteFunc(services, func(s service) bool {
			return !slices.ContainsFunc(only, func(n string) bool { return serviceHas(s, n) })
		})
	}
	sortServices(services)
	slices.SortFunc(delays, func(a, b queueStat) int {
		if a.Role != b.Role {
			return roleRank[a.Role] - roleRank[b.Role]
		}
		return strings.Compare(a.Name, b.Name)
	})
	slices.Sort(other)
	if len(only) > 0 {
		other = nil
	}
	return services, delays, other
}

// withMissing adds to services those of the named queues the listing does
// not have at all, as missing: asked for, and not there.
func withMissing(services []service, named []string) []service {
	for _, n := range named {
		q, role, _ := classify(n)
		if q == "" || slices.ContainsFunc(services, func(s service) bool { return serviceHas(s, n) }) || role == roleDelayLevel || role == roleUndeliverable {
			continue
		}
		services = append(services, missingService(q)...)
	}
	sortServices(services)
	return services
}

// missingService is the service of queue when none of its family is
// there: Q, Q.dlq and Q.parked, missing; one element, so that a caller
// may append it or take its address.
func missingService(queue string) []service {
	return []service{{Queue: queue, Queues: []queueStat{
		{Name: queue, Role: roleWork, Missing: true},
		{Name: acemq.DeadLetterQueue(queue), Role: roleDLQ, Missing: true},
		{Name: acemq.ParkedQueue(queue), Role: roleParked, Missing: true},
	}}}
}

// hasFamily reports whether a rung of queue is among queues.
func hasFamily(queues []queueStat, queue string) bool {
	return slices.ContainsFunc(queues, func(q queueStat) bool {
		owner, role, _ := classify(q.Name)
		return !q.Missing && owner == queue && role == roleRung
	})
}

var roleRank = map[string]int{roleWork: 0, roleDLQ: 1, roleParked: 2, roleRung: 3, roleDelayLevel: 4, roleUndeliverable: 5}

// notSampledYet stands in a queue's counts while the management API has
// not sampled them: unknown, which "-" or a blank would pass for none.
const notSampledYet = "not sampled yet"

// delayLevels is the delay levels' counts added up, as far as the source
// gives them.
type delayLevels struct {
	queueStat
	levels    int // levels there
	unsampled int // of which the management API has not sampled yet
}

func delayTotal(delays []queueStat) delayLevels {
	var t delayLevels
	for _, q := range delays {
		if q.Role != roleDelayLevel || q.Missing {
			continue
		}
		t.levels++
		if q.NotSampledYet {
			t.unsampled++
			continue
		}
		t.Messages, t.Ready, t.Unacked, t.DeadLettering = plus(t.Messages, q.Messages), plus(t.Ready, q.Ready), plus(t.Unacked, q.Unacked), plus(t.DeadLettering, q.DeadLettering)
	}
	return t
}

// statusNotes gathers what the table's numbers need said under them.
type statusNotes struct {
	deadLettering []string // queues holding messages waiting to be dead-lettered
	held          int
	unsampled     int
	breakers      []string // services with a breaker not closed
	idle          []string // partitions with no consumer while others of their set have one
	idleOf        []string // their partitioned queues
	// unsampledPartitions: a queue not sampled yet is a ? in the
	// partitioned queues' table
	unsampledPartitions bool
}

func (n *statusNotes) add(q queueStat) {
	if q.NotSampledYet {
		n.unsampled++
	}
	if q.DeadLettering != nil && *q.DeadLettering > 0 {
		n.deadLettering = append(n.deadLettering, escape.String(q.Name))
		n.held += *q.DeadLettering
	}
}

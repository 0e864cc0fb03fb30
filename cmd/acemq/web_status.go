package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/escape"
)

// webStatus is the status page: acemq status's table, the delay levels
// added up in one row as acemq status prints them (with the undeliverable
// queue, and the levels that hold messages, missing or not sampled yet,
// below), and which queues have a triage link.
type webStatus struct {
	statusOut
	DelayTotal *webDelays
	DelayRows  []queueStat
	Triage     map[string]bool
	Breakers   map[string][]webBreaker // by service (a partition's by partition): its breakers not closed
	NotClosed  string                  // "2 circuit breakers", "" for none
	// Plain are the services that are not partitioned; Partitioned, the
	// partitioned ones, in a table of their own (web_partitions.go).
	Plain       []service
	Partitioned []webPartitioned
	Ordered     bool   // a partitioned queue is ordered: a column for the active consumer
	Idle        string // the note on partitions without a consumer, "" for none
}

// webBreaker is a breaker as the status page shows it under its service,
// every string from the marker escaped (escape.String) before the
// template escapes it for HTML.
type webBreaker struct {
	Instance string
	State    string
	Class    string // open, half-open or unknown
	When     string // since when, when it probes
	Why      string
	Note     string
	Marker   string
}

type webDelays struct {
	delayLevels
	Name   string
	Levels string // "28 levels", and how many are not sampled yet
}

func (w *webUI) statusPage(out statusOut) webStatus {
	p := webStatus{statusOut: out, Triage: map[string]bool{}, Breakers: map[string][]webBreaker{}}
	if n := breakerCount(out.Services); n > 0 {
		p.NotClosed = plural(n, "circuit breaker")
	}
	addBreakers := func(s service) {
		for _, m := range s.Breakers {
			p.Breakers[s.Queue] = append(p.Breakers[s.Queue], webBreaker{Instance: escape.String(orDash(m.Instance)), State: escape.String(orDash(m.State)),
				Class: breakerClass(m.State), When: breakerWhen(w.a.now(), m), Why: escape.String(m.Why), Note: escape.String(m.Note), Marker: escape.String(m.Marker)})
		}
	}
	for _, s := range out.Services {
		addBreakers(s)
		for _, part := range s.Partitions {
			addBreakers(part.service)
		}
		for _, q := range s.Queues {
			p.Triage[q.Name] = !q.Missing && w.readable(q.Name)
		}
		if s.Partitions == nil {
			p.Plain = append(p.Plain, s)
		}
	}
	p.Partitioned, p.Ordered, p.Idle = w.partitionedPage(out.Services)
	if len(out.Delays) > 0 {
		t := delayTotal(out.Delays)
		levels := plural(t.levels, "level")
		if t.unsampled > 0 {
			levels += fmt.Sprintf(", %d %s", t.unsampled, notSampledYet)
		}
		p.DelayTotal = &webDelays{delayLevels: t, Name: delay.Prefix + ".*", Levels: levels}
		for _, q := range out.Delays {
			if q.Role == roleUndeliverable || q.Missing || q.NotSampledYet || waiting(q) {
				p.DelayRows = append(p.DelayRows, q)
			}
		}
	}
	return p
}

// status is acemq status: the management API, else the queues named.
func (w *webUI) status(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.appFor(r)
	out := statusOut{Vhost: w.cfg.vhost, Management: w.cfg.mgmt.String()}
	listed, err := w.cfg.mgmt.queues(a.ctx, w.cfg.vhost)
	if err == nil {
		out.Source = "management API"
		out.Services, out.Delays, out.Other = a.fromListing(listed, w.cfg.queues)
		w.render(rw, http.StatusOK, "status", "status", w.statusPage(out), "")
		return
	}
	out.Source, out.ManagementError = "passive declares", w.errText(err)
	out.Unseen = unseenByDeclare
	var me *mgmtError
	if errors.As(err, &me) && strings.HasPrefix(me.what, "the management plugin is not reachable") {
		out.ManagementError += ": enable it with rabbitmq-plugins enable rabbitmq_management"
	}
	if len(w.cfg.queues) == 0 {
		w.render(rw, http.StatusOK, "status", "status", w.statusPage(out), "name the queues to show with --queue when acemq web starts (AMQP cannot list them)")
		return
	}
	stats, err := a.inspectNamed(w.t, w.cfg.queues)
	if err != nil {
		w.render(rw, http.StatusBadGateway, "status", "status", w.statusPage(out), w.errText(err))
		return
	}
	out.Services, out.Delays, _ = group(stats, nil)
	w.render(rw, http.StatusOK, "status", "status", w.statusPage(out), "")
}

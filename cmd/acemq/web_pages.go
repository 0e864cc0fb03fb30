package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/redact"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// webTriage is the triage page: acemq triage's groups, and what the read
// cost.
type webTriage struct {
	triageOut
	Cost string
}

// triage is acemq triage Q: every message read, grouped, all given back;
// a read mayRead allows.
func (w *webUI) triage(rw http.ResponseWriter, r *http.Request) {
	q := param(r, "queue")
	if q == "" {
		w.render(rw, http.StatusBadRequest, "triage", "triage", webTriage{triageOut: triageOut{Groups: []triageGroup{}}}, "give the queue: /triage?queue=orders.dlq")
		return
	}
	if strings.Contains(q, partitionWildcard) {
		w.triagePartitions(rw, r, q) // Q.p*.dlq: every partition's (web_partitions.go)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.appFor(r)
	cost, ok := w.mayRead(rw, r, a, "triage", q, "")
	if !ok {
		return
	}
	out, err := w.scan(a, q)
	if err != nil {
		w.render(rw, httpStatus(err), "triage", "triage "+q, webTriage{triageOut: triageOut{Queue: q, Groups: []triageGroup{}}}, w.errText(err))
		return
	}
	w.render(rw, http.StatusOK, "triage", "triage "+q, webTriage{triageOut: out, Cost: cost.String()}, "")
}

func (w *webUI) scan(a *app, q string) (triageOut, error) {
	info, err := w.t.Inspect(a.ctx, q)
	if err != nil {
		return triageOut{}, err
	}
	return a.scan(w.t, q, info.Messages, w.cfg.read, 120, 0, true)
}

func httpStatus(err error) int {
	if errors.Is(err, transport.ErrNotFound) {
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

// webMessage is one message as the message page shows it: every string
// escaped (escape.String) before the template escapes it for HTML.
type webMessage struct {
	Queue   string
	ID      string
	Cost    string // what the read cost
	Found   bool
	Read    int
	Fields  [][2]string // the envelope, in order
	Headers [][2]string // sorted by name
	Body    string
	Bytes   int
	Cut     bool
	Slip    *slipView // the routing slip it carries, as peek shows it; nil for none
}

// maxBodyWeb bounds the body shown on the message page.
const maxBodyWeb = 64 << 10

// message is one message of a queue, found by id with peek's filter.
func (w *webUI) message(rw http.ResponseWriter, r *http.Request) {
	q, id := param(r, "queue"), param(r, "id")
	m := webMessage{Queue: q, ID: escape.String(id)}
	if q == "" || id == "" {
		w.render(rw, http.StatusBadRequest, "message", "message", m, "give the queue and the id: /message?queue=orders.dlq&id=ID")
		return
	}
	filter, _ := replayFilter("", "", []string{id})
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.appFor(r)
	cost, ok := w.mayRead(rw, r, a, "message", q, id)
	if !ok {
		return
	}
	m.Cost = cost.String()
	out, err := a.lookFor(w.t, q, 10000, 1, true, filter) // as peek --id reads, up to its --scan
	if err != nil {
		w.render(rw, httpStatus(err), "message", "message", m, w.errText(err))
		return
	}
	m.Read = *out.Read
	if len(out.Messages) == 0 {
		w.render(rw, http.StatusNotFound, "message", "message", m, fmt.Sprintf("no message of the %d in %s has id %s", m.Read, escape.String(q), m.ID))
		return
	}
	p := out.Messages[0]
	m.Found = true
	add := func(k, v string) { m.Fields = append(m.Fields, [2]string{k, v}) }
	add("id", escape.String(p.ID))
	add("attempt", strconv.Itoa(p.Attempt))
	add("age", p.Age)
	if p.Created != nil {
		add("created", p.Created.Format(stamp))
	}
	if p.DeadLettered != nil {
		add("dead-lettered by the broker", p.DeadLettered.Format(stamp))
	}
	add("reason", a.redact(escape.String(redact.URLsIn(orDash(p.Reason)))))
	add("group", triage.ID(triage.Key(p.Reason)))
	add("exchange", escape.String(orDash(p.Exchange)))
	add("routing key", escape.String(orDash(p.RoutingKey)))
	add("redelivered", strconv.FormatBool(p.Redelivered))
	add("bytes", strconv.Itoa(p.Bytes))
	keys := make([]string, 0, len(p.Headers))
	for k := range p.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m.Headers = append(m.Headers, [2]string{escape.String(k), a.redact(escape.String(redact.URLsIn(fmt.Sprint(p.Headers[k]))))})
	}
	if p.Slip != nil {
		m.Slip = viewSlip(p.Slip, a.redact)
	}
	m.Bytes = p.Bytes
	body := *p.Body
	if len(body) > maxBodyWeb {
		m.Body, m.Cut = escape.Cut(body, maxBodyWeb), true
	} else {
		m.Body = escape.String(body)
	}
	w.render(rw, http.StatusOK, "message", "message "+m.ID, m, "")
}

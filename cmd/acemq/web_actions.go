package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

// The dashboard's actions (web.go serves its pages): a replay or discard
// of a group, posted with the token, carried out by triage's own moves.

// act replays or discards a group, as acemq triage --replay GROUP and
// --discard GROUP --to-queue Q --why TEXT do: the group counted by a
// scan, then moved with the same functions.
func (w *webUI) act(rw http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(rw, "acemq web: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !w.tokenOK(r) {
		http.Error(rw, "acemq web: the form's token is missing or is not this dashboard's (reload the page)", http.StatusForbidden)
		return
	}
	q, sel := r.PostForm.Get("queue"), r.PostForm.Get("group")
	discard := r.URL.Path == "/discard"
	toQueue, why := r.PostForm.Get("to_queue"), r.PostForm.Get("why")
	fail := func(code int, msg string) {
		w.render(rw, code, "action", "action", actionOut{Queue: q, Group: escape.String(sel)}, msg)
	}
	switch {
	case q == "" || sel == "":
		fail(http.StatusBadRequest, "the form has no queue or no group")
		return
	case !w.readable(q):
		fail(http.StatusForbidden, fmt.Sprintf("acemq web reads only .dlq, .parked and archive queues, and those named with --allow-read; %s is %s %s",
			escape.String(q), article(readKind(q)), readKind(q)))
		return
	case discard && strings.TrimSpace(why) == "":
		fail(http.StatusBadRequest, "a discard needs a why: it is written on every message archived")
		return
	case discard && toQueue == "":
		fail(http.StatusBadRequest, "a discard needs the archive queue")
		return
	case discard && toQueue == q:
		fail(http.StatusBadRequest, "the archive queue is the queue being triaged")
		return
	case discard && w.cfg.operator == "":
		fail(http.StatusBadRequest, "a discard needs an operator: start acemq web with --operator (or $USER set)")
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.appFor(r)
	a.ctx = context.WithoutCancel(a.ctx) // a closed tab does not stop a move half-way; each message is still moved whole
	res, err := w.moveGroup(a, q, sel, discard, toQueue, why)
	code := http.StatusOK
	errText := ""
	if err != nil {
		code, errText = httpStatus(err), w.errText(err)
		if res.Error == "" {
			res.Error = errText
		}
	}
	res.Group, res.To = escape.String(res.Group), escape.String(res.To)
	w.render(rw, code, "action", res.Action+" "+res.Group, res, errText)
}

// moveGroup is what acemq triage does after its flags: scan, count the
// group, settle, then replay or discard it, and the counts after.
func (w *webUI) moveGroup(a *app, q, sel string, discard bool, toQueue, why string) (actionOut, error) {
	res := actionOut{Queue: q, Group: sel, Action: "replay"}
	if discard {
		res.Action, res.To = "discard", toQueue
	}
	out, err := w.scan(a, q)
	if err != nil {
		return res, err
	}
	for _, g := range out.Groups {
		if g.ID == sel || g.Key == sel {
			res.Matched = g.Count
		}
	}
	res.Before = out.Depth
	if res.Matched == 0 {
		return res, fmt.Errorf("no message of the %d read in %s is in group %q", out.Read, escape.String(q), escape.String(sel))
	}
	a.settle(w.t, q, out.Depth)
	if !discard {
		err = a.triageReplay(w.t, &res, "", res.Matched, 0, false, 0)
	} else {
		var arch archive
		if arch, err = a.openArchive(w.t, "", toQueue, q, sel, w.cfg.operator, why); err == nil {
			res.To = arch.name()
			err = a.triageDiscard(w.t, &res, arch, res.Matched, 0, 0)
			if cerr := arch.close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	// Left and After are the move's own counts (triageReplay,
	// triageDiscard): what it gave back and what the broker says is left.
	if err != nil {
		res.Error = a.redact(escape.String(err.Error()))
	}
	return res, err
}

package main

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

// crossSite says why a browser's request comes from another site, "" when
// nothing says it does. A page on any site can make a browser request the
// dashboard's URLs (an <img>, a form, a fetch, an iframe); the browser says
// where from: Sec-Fetch-Site (Chromium, Firefox and Safari send it to
// localhost and to https) and, on a POST or a fetch, Origin. same-site is
// another site here: a page on another port of 127.0.0.1 is same-site.
func crossSite(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "Sec-Fetch-Site: " + escape.String(site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host != r.Host {
			return "Origin " + escape.String(origin)
		}
	}
	return ""
}

// fromDashboard reports whether a request that reads a queue comes from
// the dashboard itself: a link followed from one of its pages
// (Sec-Fetch-Site same-origin), an address the operator typed or
// bookmarked (none), or, from a browser that sends no Sec-Fetch-Site,
// a link carrying the dashboard's key, or a form carrying its token.
// crossSite has refused the rest before.
func (w *webUI) fromDashboard(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	}
	return same(r.URL.Query().Get("k"), w.key) || (r.Method == http.MethodPost && w.tokenOK(r))
}

// tokenOK reports whether a POST carries the dashboard's form token.
func (w *webUI) tokenOK(r *http.Request) bool {
	return r.Method == http.MethodPost && same(r.PostFormValue("token"), w.token)
}

func same(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// readable reports whether the dashboard may read queue at all: a .dlq, a
// .parked, an archive queue, or a queue named with --allow-read.
func (w *webUI) readable(queue string) bool {
	return readKind(queue) == kindDLQ || readKind(queue) == kindParked || readKind(queue) == kindArchive || slices.Contains(w.cfg.readable, queue)
}

// confirmation is the page shown before a read that costs more than the
// redelivered mark: what it costs, and a form that confirms it.
type confirmation struct {
	Path   string // where the form posts: /triage or /message
	Queue  string
	ID     string // the message page's id, raw (the form carries it back)
	Cost   string
	Reason string // why it is asked
}

// mayRead decides whether this request may read queue now, and writes the
// answer when it may not: refused (403) when it does not come from the
// dashboard or the queue is not one it reads; not found (404); or the
// confirmation page, for a read that counts against a delivery limit, of a
// queue named with --allow-read, or whose cost cannot be told, unless this
// is the confirming POST. It returns the cost, said on the page read.
func (w *webUI) mayRead(rw http.ResponseWriter, r *http.Request, a *app, page, queue, id string) (readCost, bool) {
	title := page + " " + queue
	empty := pageData(page, queue, id)
	if !w.fromDashboard(r) {
		w.render(rw, http.StatusForbidden, page, title, empty,
			"this page reads a queue, and this request does not show that it comes from the dashboard: open it from the dashboard's status page")
		return readCost{}, false
	}
	if !w.readable(queue) {
		w.render(rw, http.StatusForbidden, page, title, empty, fmt.Sprintf(
			"acemq web reads only .dlq, .parked and archive queues; %s is %s %s, and reading it takes part in its work: "+
				"start acemq web with --allow-read %s to read it (each read confirmed), or use acemq peek",
			escape.String(queue), article(readKind(queue)), readKind(queue), escape.String(queue)))
		return readCost{}, false
	}
	cost, err := a.readCost(a.ctx, w.t, w.cfg.mgmt, queue)
	if errors.Is(err, transport.ErrNotFound) {
		w.render(rw, http.StatusNotFound, page, title, empty, w.errText(err))
		return cost, false
	}
	var reason string
	switch {
	case !cost.Known():
		reason = "what this read costs cannot be told"
	case cost.SpendsBudget():
		reason = "this read counts against a delivery limit"
	case !cost.SetAside():
		reason = escape.String(queue) + " is not a .dlq, .parked or archive queue (it was named with --allow-read)"
	default:
		return cost, true
	}
	if w.tokenOK(r) && r.PostFormValue("confirm") == "yes" {
		return cost, true
	}
	w.render(rw, http.StatusOK, "confirm", "read "+queue+"?", confirmation{Path: "/" + page, Queue: queue, ID: id, Cost: cost.String(), Reason: reason}, "")
	return cost, false
}

// pageData is the empty data of a page that says only its error.
func pageData(page, queue, id string) any {
	if page == "message" {
		return webMessage{Queue: queue, ID: escape.String(id)}
	}
	return webTriage{triageOut: triageOut{Queue: queue, Groups: []triageGroup{}}}
}

// param is a request's value by name: the form's on a POST, else the
// URL's (a confirmation form posts to the URL of the page it confirms).
func param(r *http.Request, name string) string { return r.FormValue(name) }

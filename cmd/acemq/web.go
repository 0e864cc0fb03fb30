package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"os/user"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

// web serves the dashboard: status, triage groups, one message, and, with
// --allow-actions, replay or discard of a group. It reads and acts through
// the same functions as acemq status and acemq triage.
func (a *app) web(args []string) int {
	fs, _, url := a.flags("web", "[--listen 127.0.0.1:8080] [--allow-actions] [--allow-read Q]... [--queue Q]... [--url URL]",
		`Serves a local dashboard, plain HTML from this process: the status overview
(as acemq status), the triage groups of a .dlq, .parked or archive queue
(as acemq triage), one message's envelope, headers and body, every byte a producer
wrote escaped. Each page reads the broker when it is loaded.

It is read-only unless started with --allow-actions: then each group has a
replay button, and a discard button that moves the group into an archive
queue with who (--operator, default $USER) and why (a field of the form,
required), through the same code as acemq triage --replay and --discard
--to-queue: each copy confirmed before its original is acknowledged.

What it reads. Reading a queue without consuming it (each message taken,
then given back) marks every message redelivered, and on a quorum queue
with a delivery limit counts a delivery of each against the limit: a page
loaded often enough would dead-letter (or drop) them with no consumer
involved. So the dashboard reads only .dlq, .parked and archive queues
(NAME.archive) unless another queue is named with --allow-read, and before
each read it asks the management API what the read costs (the queue's
x-delivery-limit argument, its policies, RabbitMQ 4's default of 20 for a
quorum queue). A read that counts against a limit, a read of a queue named
with --allow-read, and a read whose cost cannot be told (no management API)
is shown first, with its cost, and made only once confirmed with a button.

Other sites. A page on another site can make a browser request any URL;
the dashboard answers none of them. A request whose Origin is not the
dashboard's own, or whose Sec-Fetch-Site says another site (cross-site or
same-site: another port of the same host is another site here), is refused
(403) whatever it asks. A page that reads a queue is served only to a
request that shows it comes from the dashboard: Sec-Fetch-Site same-origin
(a link followed) or none (an address typed or bookmarked), or the key its
own links carry (k=, made when the process starts; for browsers that send
no Sec-Fetch-Site, as on plain http to an address other than localhost).
Every form (a confirmed read, a replay, a discard) carries a second value
made when the process starts, which another site cannot read: a POST
without it does nothing, and a read-only dashboard refuses a replay or a
discard whatever it carries. No page another site can request has an
effect; the status page reads counts only.

It listens on 127.0.0.1 by default; it has no login of its own, so give
--listen another address only behind something that has one.

Example:
  acemq web --queue orders
  acemq web --listen 127.0.0.1:8080 --allow-actions --operator alice
  acemq web --allow-read orders.retry.5m
`, true)
	listen := fs.String("listen", "127.0.0.1:8080", "the address to serve on")
	allow := fs.Bool("allow-actions", false, "show replay and discard buttons and accept them")
	operator := fs.String("operator", "", "who the discards are by, written on each message archived (default $USER, else the login user)")
	var queues listFlag
	fs.Var(&queues, "queue", "a work queue to show when the management API is not reachable (repeatable)")
	management := fs.String("management", "", "the management API, http://host:15672 (default: the broker's host, or $"+EnvManagement+")")
	readN := fs.Int("read", 0, "triage reads at most this many messages (0: every one ready)")
	var readable listFlag
	fs.Var(&readable, "allow-read", "a queue other than a .dlq, .parked or archive queue that the dashboard may read, each read confirmed (repeatable)")
	if code, done := a.parse(fs, args); done {
		return code
	}
	if *readN < 0 {
		return a.usageError(fs, "--read may not be negative")
	}
	if *operator == "" {
		*operator = a.getenv("USER")
	}
	if *operator == "" {
		if u, err := user.Current(); err == nil {
			*operator = u.Username
		}
	}
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()
	rawURL := a.url
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return a.usageError(fs, "the broker URL: %v", err)
	}
	mc, err := a.managementFor(fs, *management)
	if err != nil {
		return a.usageError(fs, "%v", err)
	}
	w, err := newWebUI(a, t, webConfig{vhost: uri.Vhost, mgmt: mc, queues: queues, readable: readable, allowActions: *allow, operator: *operator, read: *readN})
	if err != nil {
		return a.fail(fs, err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return a.fail(fs, err)
	}
	srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	mode := "read-only"
	if *allow {
		mode = "actions allowed, as " + escape.String(*operator)
	}

	fmt.Fprintf(a.stdout, "acemq web: serving http://%s/ (%s); Ctrl-C stops it\n", ln.Addr(), mode)
	for _, q := range readable {
		fmt.Fprintf(a.stdout, "acemq web: %s may be read (--allow-read); each read is shown with its cost and made only once confirmed\n", escape.String(q))
	}
	if f, ok := a.stdout.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
		return a.fail(fs, err)
	case <-a.ctx.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	<-done
	return exitOK
}

// webConfig is what the dashboard was started with.
type webConfig struct {
	vhost        string
	mgmt         *mgmtClient
	queues       []string // --queue, for status without the management API
	readable     []string // --allow-read: queues other than the set-aside ones that may be read, confirmed
	allowActions bool
	operator     string
	read         int // triage reads at most this many (0: all)
}

// webUI is the dashboard's handler. Every read and action of the broker is
// made under mu, one at a time: a triage holds the whole queue
// unacknowledged, and a second one at the same time would see only part
// of it.
type webUI struct {
	a     *app
	t     transport.Transport
	cfg   webConfig
	token string // the per-process value every form must carry; never in a URL
	key   string // the per-process value the dashboard's own links carry (k=)
	mux   *http.ServeMux
	mu    sync.Mutex
}

func newWebUI(a *app, t transport.Transport, cfg webConfig) (*webUI, error) {
	b := make([]byte, 48)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	w := &webUI{a: a, t: t, cfg: cfg, token: hex.EncodeToString(b[:32]), key: hex.EncodeToString(b[32:]), mux: http.NewServeMux()}
	w.mux.HandleFunc("GET /{$}", w.status)
	w.mux.HandleFunc("GET /triage", w.triage)
	w.mux.HandleFunc("POST /triage", w.triage) // a read confirmed
	w.mux.HandleFunc("GET /message", w.message)
	w.mux.HandleFunc("POST /message", w.message)
	w.mux.HandleFunc("POST /replay", w.act)
	w.mux.HandleFunc("POST /discard", w.act)
	return w, nil
}

// ServeHTTP refuses a request whose Host is a name other than localhost
// (a DNS rebinding page would read the token otherwise) and one that a
// browser says comes from another site (crossSite), sets headers that
// keep the pages from being framed or running any script, and refuses
// a replay or a discard when actions are not allowed.
func (w *webUI) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h := rw.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer Chromium sends
	// "Origin: null" with the dashboard's own forms, which crossSite must
	// refuse; no other site is sent the URL (its key) either way.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if host != "localhost" && net.ParseIP(strings.Trim(host, "[]")) == nil {
		http.Error(rw, "acemq web: this dashboard answers only to an IP address or localhost", http.StatusMisdirectedRequest)
		return
	}
	if why := crossSite(r); why != "" {
		http.Error(rw, "acemq web: refused a request from another site ("+why+"); open the dashboard at its own address", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodPost && !w.cfg.allowActions && (r.URL.Path == "/replay" || r.URL.Path == "/discard") {
		http.Error(rw, "acemq web: read-only (start it with --allow-actions to act)", http.StatusForbidden)
		return
	}
	w.mux.ServeHTTP(rw, r)
}

// for a request: the app with the request's context, so that a page left
// before it is ready stops its read (and gives back what it holds).
func (w *webUI) appFor(r *http.Request) *app {
	a := *w.a
	a.ctx = r.Context()
	return &a
}

type page struct {
	Title        string
	Vhost        string
	Error        string
	AllowActions bool
	Token        string // for forms
	Key          string // for links to pages that read a queue
	Operator     string
	Readable     []string // --allow-read
	Data         any
}

func (w *webUI) render(rw http.ResponseWriter, code int, name, title string, data any, errText string) {
	p := page{Title: escape.String(title), Vhost: escape.String(w.cfg.vhost), Error: errText, AllowActions: w.cfg.allowActions, Token: w.token, Key: w.key,
		Operator: escape.String(w.cfg.operator), Readable: w.cfg.readable, Data: data}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.WriteHeader(code)
	if err := webTemplates.ExecuteTemplate(rw, name, p); err != nil {
		fmt.Fprintf(rw, "<p>template: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

// errText is err for a page: redacted and escaped.
func (w *webUI) errText(err error) string { return w.a.redact(escape.String(err.Error())) }

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// webSetup serves the dashboard on a memory broker holding queue's family
// and dead letters with reasons, as acemq web --queue queue would, with a
// management API that answers for each queue (its declaration: classic,
// no limit) but does not list them, so that status uses passive declares.
func webSetup(t *testing.T, allow bool, queue string, reasons ...string) (*httptest.Server, *webUI, transport.Transport) {
	t.Helper()
	return webSetupWith(t, webConfig{allowActions: allow}, queue, nil, reasons...)
}

// webSetupWith is webSetup with cfg (its vhost, management API, queues
// and operator filled in) and the management API's detail of the queues
// in details, over the classic ones of queue's family.
func webSetupWith(t *testing.T, cfg webConfig, queue string, details map[string]map[string]any, reasons ...string) (*httptest.Server, *webUI, transport.Transport) {
	t.Helper()
	_, dial := memoryBroker(t, queue, reasons...)
	tr, err := dial(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	classic := map[string]any{"type": "classic", "arguments": map[string]any{}, "effective_policy_definition": map[string]any{}}
	queues := map[string]map[string]any{queue: classic, queue + ".dlq": classic, queue + ".parked": classic, queue + ".dlq.archive": classic}
	for k, v := range details {
		queues[k] = v
		if v == nil {
			delete(queues, k) // the management API knows nothing of it
		}
	}
	fake := fakeManagement(t, "3.10.8", false, queues)
	mc, err := newMgmtClient(fake.URL, "amqp://guest:guest@localhost/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{ctx: context.Background(), dial: dial, getenv: func(string) string { return "" }, now: time.Now, stdout: io.Discard, stderr: io.Discard, url: "amqp://guest:guest@localhost/"}
	cfg.vhost, cfg.mgmt, cfg.queues, cfg.operator = "/", mc, []string{queue}, "alice"
	w, err := newWebUI(a, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return srv, w, tr
}

// sameOrigin is what Chromium sends with a link followed from one of the
// dashboard's pages.
var sameOrigin = http.Header{"Sec-Fetch-Site": {"same-origin"}}

// send makes a request with the headers given, a form for a POST.
func send(t *testing.T, srv *httptest.Server, method, path string, h http.Header, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "<p>template: ") {
		t.Errorf("%s %s: the page's template failed:\n%s", method, path, b)
	}
	return resp.StatusCode, string(b)
}

// get is a link followed in the browser.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	return send(t, srv, http.MethodGet, path, sameOrigin, nil)
}

// post is a form of the dashboard's posted in the browser.
func post(t *testing.T, srv *httptest.Server, path string, form url.Values) (int, string) {
	t.Helper()
	return send(t, srv, http.MethodPost, path, http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {srv.URL}}, form)
}

// row is the table row of queue on the status page.
func row(page, queue string) string {
	i := strings.Index(page, `data-queue="`+queue+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

var reReady = regexp.MustCompile(`class="n ready">([^<]*)<`)

func readyIn(page, queue string) string {
	m := reReady.FindStringSubmatch(row(page, queue))
	if m == nil {
		return ""
	}
	return m[1]
}

func depth(t *testing.T, tr transport.Transport, q string) int {
	t.Helper()
	info, err := tr.Inspect(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

func TestWebPages(t *testing.T) {
	t.Parallel()
	reasons, want := mixedReasons()
	srv, _, _ := webSetup(t, false, "orders", reasons...)

	code, page := get(t, srv, "/")
	if code != 200 || readyIn(page, "orders.dlq") != fmt.Sprint(len(reasons)) || readyIn(page, "orders") != "0" ||
		!strings.Contains(page, "passive declares") || !strings.Contains(page, `href="/triage?queue=orders.dlq&amp;k=`) {
		t.Errorf("status: %d\n%s", code, page)
	}

	code, page = get(t, srv, "/triage?queue=orders.dlq")
	if code != 200 || !strings.Contains(page, fmt.Sprintf(`<span id="read">%d</span> in <span id="groups">%d</span> groups`, len(reasons), len(want))) {
		t.Fatalf("triage: %d\n%s", code, page)
	}
	for key, n := range want {
		if !strings.Contains(page, fmt.Sprintf(`id="%s" data-count="%d"`, triage.ID(key), n)) {
			t.Errorf("group %s (%q) of %d not shown", triage.ID(key), key, n)
		}
	}
	if strings.Contains(page, "<button") || strings.Contains(page, `name="token"`) {
		t.Errorf("a read-only dashboard shows actions")
	}

	code, page = get(t, srv, "/message?queue=orders.dlq&id=m-3")
	if code != 200 || !strings.Contains(page, reasons[2]) || !strings.Contains(page, `{&#34;order&#34;:&#34;m-3&#34;}`) ||
		!strings.Contains(page, "<code>x-acemq-id</code>") {
		t.Errorf("message: %d\n%s", code, page)
	}
	if code, _ := get(t, srv, "/message?queue=orders.dlq&id=nope"); code != 404 {
		t.Errorf("a missing message: %d", code)
	}
	if code, _ := get(t, srv, "/triage?queue=nope.dlq"); code != 404 {
		t.Errorf("a missing queue: %d", code)
	}
}

// TestWebRefuses: a read-only dashboard refuses every POST, one with
// actions refuses a form without its token, and neither answers to a host
// name (DNS rebinding).
func TestWebRefuses(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	group := triage.ID(triage.Key(reasons[0]))
	ro, roUI, roT := webSetup(t, false, "orders", reasons...)
	for _, path := range []string{"/replay", "/discard"} {
		if code, _ := post(t, ro, path, url.Values{"token": {roUI.token}, "queue": {"orders.dlq"}, "group": {group}, "why": {"x"}, "to_queue": {"a"}}); code != 403 {
			t.Errorf("read-only %s: %d, want 403", path, code)
		}
	}
	rw, _, rwT := webSetup(t, true, "orders", reasons...)
	for _, token := range []string{"", "0123", roUI.token} {
		if code, _ := post(t, rw, "/replay", url.Values{"token": {token}, "queue": {"orders.dlq"}, "group": {group}}); code != 403 {
			t.Errorf("token %q: %d, want 403", token, code)
		}
	}
	_, page := get(t, rw, "/triage?queue=orders.dlq")
	if !strings.Contains(page, `class="replay"`) || !strings.Contains(page, `class="discard"`) {
		t.Errorf("no buttons with --allow-actions:\n%s", page)
	}
	req, _ := http.NewRequest(http.MethodGet, rw.URL+"/", nil)
	req.Host = "evil.example:8080"
	resp, err := rw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d", resp.StatusCode)
	}
	for _, tr := range []transport.Transport{roT, rwT} {
		if n := depth(t, tr, "orders.dlq"); n != len(reasons) || depth(t, tr, "orders") != 0 {
			t.Errorf("something moved: %d in orders.dlq", n)
		}
	}
}

// TestWebActions: a replay and a discard move exactly their group, as
// triage --replay and --discard --to-queue do.
func TestWebActions(t *testing.T) {
	t.Parallel()
	reasons, want := mixedReasons()
	srv, w, tr := webSetup(t, true, "orders", reasons...)
	replayKey := "exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503"
	discardKey := `the handler rejected it: no such customer "<q>"`

	code, page := post(t, srv, "/replay", url.Values{"token": {w.token}, "queue": {"orders.dlq"}, "group": {triage.ID(replayKey)}})
	n := want[replayKey]
	if code != 200 || !strings.Contains(page, fmt.Sprintf(`<span id="moved">%d</span> replayed to <code>orders</code>, <span id="left">0</span> left`, n)) ||
		!strings.Contains(page, fmt.Sprintf(`<span id="before">%d</span> before, <span id="after">%d</span> after`, len(reasons), len(reasons)-n)) {
		t.Fatalf("replay: %d\n%s", code, page)
	}
	if got := depth(t, tr, "orders"); got != n {
		t.Errorf("orders holds %d, want %d", got, n)
	}
	if got := depth(t, tr, "orders.dlq"); got != len(reasons)-n {
		t.Errorf("orders.dlq holds %d, want %d", got, len(reasons)-n)
	}

	if code, _ := post(t, srv, "/discard", url.Values{"token": {w.token}, "queue": {"orders.dlq"}, "group": {triage.ID(discardKey)}, "to_queue": {"orders.archive"}, "why": {"  "}}); code != 400 {
		t.Errorf("a discard without why: %d", code)
	}
	why := "customers deleted in the purge"
	code, page = post(t, srv, "/discard", url.Values{"token": {w.token}, "queue": {"orders.dlq"}, "group": {triage.ID(discardKey)}, "to_queue": {"orders.archive"}, "why": {why}})
	m := want[discardKey]
	if code != 200 || !strings.Contains(page, fmt.Sprintf(`<span id="moved">%d</span> archived in <code>orders.archive</code>`, m)) {
		t.Fatalf("discard: %d\n%s", code, page)
	}
	if got := depth(t, tr, "orders.dlq"); got != len(reasons)-n-m {
		t.Errorf("orders.dlq holds %d, want %d", got, len(reasons)-n-m)
	}
	for range m {
		d, ok, err := tr.Get(context.Background(), "orders.archive")
		if err != nil || !ok {
			t.Fatalf("the archive: %v %v", ok, err)
		}
		if d.Headers[HeaderArchivedWhy] != why || d.Headers[HeaderArchivedBy] != "alice" || !triage.Matches(triage.ID(discardKey), acemq.EnvelopeOf(d).Error) {
			t.Errorf("archived: %v", d.Headers)
		}
		_ = d.Ack()
	}
	if got := depth(t, tr, "orders.archive"); got != 0 {
		t.Errorf("the archive holds %d more", got)
	}
	// A group no longer there moves nothing.
	if code, _ := post(t, srv, "/replay", url.Values{"token": {w.token}, "queue": {"orders.dlq"}, "group": {triage.ID(replayKey)}}); code == 200 {
		t.Errorf("an empty group: %d", code)
	}
}

// TestWebEscapes: ids, reasons, headers and bodies a producer wrote reach
// the page as text: no tag, no control character, no bidi override.
func TestWebEscapes(t *testing.T) {
	t.Parallel()
	srv, _, tr := webSetup(t, true, "orders")
	hostileID := "<script>alert(1)</script>\x1b]52;c;ZWNobyBwd25lZA==\x07\u202egpj.exe"
	hostileReason := "the handler rejected it: \"><img src=x onerror=alert(1)>\x1b[2J\r\nforged row"
	_, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.dlq", Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: hostileID, acemq.HeaderAttempt: 2, acemq.HeaderError: hostileReason, "x-evil<b>": "\u2066<svg onload=alert(1)>"},
		Body:    []byte("</pre><script>alert(2)</script>\x1b[31m\u202e")})
	if err != nil {
		t.Fatal(err)
	}
	_, triagePage := get(t, srv, "/triage?queue=orders.dlq")
	code, msgPage := get(t, srv, "/message?queue=orders.dlq&id="+url.QueryEscape(hostileID))
	if code != 200 {
		t.Fatalf("message: %d\n%s", code, msgPage)
	}
	for name, page := range map[string]string{"triage": triagePage, "message": msgPage} {
		for _, bad := range []string{"<script", "<img", "<svg", "evil<b>", "\x1b", "\x07", "\u202e", "\u2066", "\r"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s page holds %q", name, bad)
			}
		}
		if !strings.Contains(page, "&lt;script&gt;") {
			t.Errorf("%s page does not show the id as text:\n%s", name, page)
		}
	}
	if !strings.Contains(msgPage, "&lt;/pre&gt;&lt;script&gt;alert(2)") || !strings.Contains(msgPage, "x-evil&lt;b&gt;") {
		t.Errorf("message page:\n%s", msgPage)
	}
}

// startWeb runs acemq web with args on a free port and returns its URL;
// the command is stopped, and its status checked, when the test ends.
func startWeb(t *testing.T, dial dialer, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"web", "--listen", "127.0.0.1:0"}, args...), pw, &errOut, dial)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("acemq web: exit %d\n%s", code, errOut.String())
		}
	})
	m := regexp.MustCompile(`serving (http://\S+/) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		cancel()
		t.Fatalf("acemq web printed %q (%v)", line, err)
	}
	return m[1]
}

// TestWebCommand: acemq web itself, on the memory broker: it prints its
// URL and serves until it is stopped.
func TestWebCommand(t *testing.T) {
	t.Parallel()
	_, dial := memoryBroker(t, "orders", "exhausted 5 attempts: the warehouse is not answering")
	base := startWeb(t, dial, "--url", "amqp://operator:secret@localhost/", "--management", "http://127.0.0.1:1", "--queue", "orders")
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || readyIn(string(b), "orders.dlq") != "1" || strings.Contains(string(b), "secret") {
		t.Errorf("%d\n%s", resp.StatusCode, b)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/retry"
)

// EnvScreenshots names the folder the browser test saves its screenshots
// in (docs/screenshots when they are taken for the docs); by default a
// temporary one.
const EnvScreenshots = "ACEMQ_WEB_SCREENSHOTS"

// browser starts headless Chromium (Debian's package) for the test. It
// skips only when Chromium is absent and CI is unset: under scripts/test,
// which installs it, a missing browser is a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no chromium (apt-get install chromium; scripts/test installs it)")
		}
		t.Fatalf("CI is set and chromium is not installed: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// browse runs steps in the browser's tab, a minute at most.
func browse(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// read runs one action that returns a value.
func read[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := read(t, ctx, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRabbitMQWebBrowser: acemq web on RabbitMQ, in a real browser: the
// status page shows the .dlq's count, the triage page the groups and
// their counts, a sample's link its message; the replay button moves
// exactly its group; a read-only dashboard has no buttons.
func TestRabbitMQWebBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	u := rabbitVhost(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	if err := tr.Declare(context.Background(), acemq.Topology(q, retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reasons, want := mixedReasons()
	created := time.Now().Add(-2 * time.Hour)
	for i, r := range reasons {
		seedDeadLetter(t, tr, q, fmt.Sprintf("m-%d", i+1), r, created)
	}
	hostile := "the handler rejected it: <b>bold</b> \x1b[2J\u202eexe.gpj"
	seedDeadLetter(t, tr, q, "evil-\x1b]52;c;cHduZWQ=\x07", hostile, created)
	want[triage.Key(hostile)] = 1
	total := len(reasons) + 1
	waitDepth(t, tr, q+".dlq", total)

	base := startWeb(t, dialRabbitMQ, "--url", u, "--allow-actions", "--operator", "alice")

	// The management API's numbers are its last sample: reload until it
	// has the messages.
	deadline := time.Now().Add(30 * time.Second)
	for {
		browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#status`)))
		ready := read(t, ctx, chromedp.Text(chromedp.CSS(`tr[data-queue="`+q+`.dlq"] .ready`)))
		if ready == strconv.Itoa(total) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status page shows %q ready in %s.dlq, want %d", ready, q, total)
		}
		time.Sleep(time.Second)
	}
	screenshot(t, ctx, dir, "status.png")

	browse(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-queue="`+q+`.dlq"] a`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	groups, nread := read(t, ctx, chromedp.Text(chromedp.CSS(`#groups`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#read`)))
	if groups != strconv.Itoa(len(want)) || nread != strconv.Itoa(total) {
		t.Errorf("triage: read %s in %s groups, want %d in %d", nread, groups, total, len(want))
	}
	for key, n := range want {
		count := read(t, ctx, chromedp.AttributeValue(chromedp.CSS(`#`+triage.ID(key)), "data-count")).Value
		if count != strconv.Itoa(n) {
			t.Errorf("group %s (%q): %s, want %d", triage.ID(key), key, count, n)
		}
	}
	screenshot(t, ctx, dir, "triage.png")

	html := read(t, ctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
	if strings.Contains(html, "<b>bold") || strings.ContainsAny(html, "\x1b\x07\u202e") {
		t.Errorf("the triage page holds a producer's markup or control characters")
	}

	replayKey := "exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503"
	g := "#" + triage.ID(replayKey)
	browse(t, ctx, chromedp.Click(chromedp.CSS(g+` a.sample`)), chromedp.WaitVisible(chromedp.CSS(`#envelope`)))
	envelope := read(t, ctx, chromedp.Text(chromedp.CSS(`#envelope`)))
	if !strings.Contains(envelope, "m-1") || !strings.Contains(envelope, "HTTP 503") {
		t.Errorf("message page: %s", envelope)
	}
	screenshot(t, ctx, dir, "message.png")

	browse(t, ctx, chromedp.Navigate(base+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(g+` button.replay`)),
		chromedp.Click(chromedp.CSS(g+` button.replay`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	moved, before, after := read(t, ctx, chromedp.Text(chromedp.CSS(`#moved`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#before`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#after`)))
	n := want[replayKey]
	if moved != strconv.Itoa(n) || before != strconv.Itoa(total) || after != strconv.Itoa(total-n) {
		t.Errorf("replay: moved %s, %s before, %s after; want %d, %d, %d", moved, before, after, n, total, total-n)
	}
	screenshot(t, ctx, dir, "replayed.png")
	waitDepth(t, tr, q, n)
	waitDepth(t, tr, q+".dlq", total-n)
	ids := drainIDs(t, tr, q)
	slices.Sort(ids)
	if strings.Join(ids, " ") != "m-1 m-2 m-3 m-4 m-5 m-6 m-7" {
		t.Errorf("replayed %v, want the group's m-1 to m-7", ids)
	}

	discardKey := `the handler rejected it: no such customer "<q>"`
	g = "#" + triage.ID(discardKey)
	browse(t, ctx, chromedp.Navigate(base+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(g+` button.discard`)),
		chromedp.SendKeys(chromedp.CSS(g+` input[name=why]`), "customers deleted in the purge"),
		chromedp.Click(chromedp.CSS(g+` button.discard`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	m := want[discardKey]
	if moved := read(t, ctx, chromedp.Text(chromedp.CSS(`#moved`))); moved != strconv.Itoa(m) {
		t.Errorf("discard: moved %s, want %d", moved, m)
	}
	screenshot(t, ctx, dir, "discarded.png")
	waitDepth(t, tr, q+".dlq.archive", m)
	waitDepth(t, tr, q+".dlq", total-n-m)

	ro := startWeb(t, dialRabbitMQ, "--url", u)
	browse(t, ctx, chromedp.Navigate(ro+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	buttons := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('button').length`))
	forms := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('form').length`))
	if buttons != 0 || forms != 0 {
		t.Errorf("a read-only dashboard shows %d buttons in %d forms", buttons, forms)
	}
	screenshot(t, ctx, dir, "triage-read-only.png")
	deleteQueues(t, u, q, q+".dlq", q+".parked", q+".dlq.archive")
}

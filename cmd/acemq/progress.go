package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acemq/acemq/retry"
)

// progress shows how far a long operation has got, on stderr: total,
// done, rate and time left. A terminal gets a bar redrawn in place, a pipe
// a line every interval, so that a log keeps the history and a terminal
// does not scroll.
type progress struct {
	a     *app
	what  string // "orders.dlq: read", "orders.dlq -> orders: moved"
	total int    // 0 when unknown
	done  int
	every time.Duration
	// note, when set, is said before the counts, which then read as
	// messages read: "moved 3, skipped 1 so far (4 of 10 (40%) read, ...)".
	note  string
	tty   io.Writer // the terminal itself, nil for a pipe
	start time.Time
	last  time.Time
	drawn bool
	shown int // done, when last shown
}

// progressEvery is how often a pipe gets a line; a bar is redrawn ten
// times as often.
const progressEvery = 2 * time.Second

// newProgress starts showing progress on what, out of total; every is how
// often a pipe gets a line (0: never, nor a bar).
func (a *app) newProgress(what string, total int, every time.Duration) *progress {
	now := a.now()
	return &progress{a: a, what: what, total: total, every: every, tty: terminal(a.stderr), start: now, last: now}
}

// terminal is the terminal w writes to through its redaction, or nil when
// it is not one (a pipe, a file, a test's buffer).
func terminal(w io.Writer) io.Writer {
	rw, ok := w.(*redactWriter)
	if !ok {
		return nil
	}
	f, ok := rw.w.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}

// set records that done are done, and shows it when it is time.
func (p *progress) set(done int) {
	if p == nil {
		return
	}
	p.done = done
	if p.every <= 0 {
		return
	}
	interval := p.every
	if p.tty != nil {
		interval = p.every / 10
	}
	if now := p.a.now(); now.Sub(p.last) >= interval {
		p.last = now
		p.show(now)
	}
}

// stop ends the bar's line, if one was drawn: what comes next is printed
// below it.
func (p *progress) stop() {
	if p != nil && p.drawn && p.tty != nil {
		if p.shown != p.done {
			p.show(p.a.now())
		}
		fmt.Fprint(p.tty, "\n")
		p.drawn = false
	}
}

func (p *progress) show(now time.Time) {
	elapsed := now.Sub(p.start)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(p.done) / elapsed.Seconds()
	}
	counts := fmt.Sprintf("%d", p.done)
	eta := ""
	switch {
	case p.total > 0 && p.done > p.total:
		// The queue grew while it was read: no percentage over 100, no
		// time left, but what was expected, said.
		counts = fmt.Sprintf("%d (%d were counted at the start: the queue grew while it was read)", p.done, p.total)
	case p.total > 0:
		counts = fmt.Sprintf("%d of %d (%d%%)", p.done, p.total, p.done*100/p.total)
		if rate > 0 && p.done < p.total {
			left := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
			eta = ", ETA " + retry.FormatDelay(left.Round(time.Second))
		}
	}
	p.shown = p.done
	line := fmt.Sprintf("%s %s, %.0f/s%s", p.what, counts, rate, eta)
	if p.note != "" {
		line = fmt.Sprintf("%s %s (%s read, %.0f/s%s)", p.what, p.note, counts, rate, eta)
	}
	if p.tty == nil {
		fmt.Fprintln(p.a.stderr, line)
		return
	}
	bar := ""
	if p.total > 0 && p.done <= p.total {
		const width = 30
		n := min(width, p.done*width/p.total)
		bar = "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] "
	}
	// Straight to the terminal, redacted here: the redacting writer holds
	// text until a line ends, and a bar's line does not.
	fmt.Fprint(p.tty, "\r\x1b[K"+p.a.redact(bar+line))
	p.drawn = true
}

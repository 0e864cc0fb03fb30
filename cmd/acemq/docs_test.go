package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

// docCommand is one command line found in a shell block of the docs.
type docCommand struct {
	file string
	line int
	args []string
}

// docCommands reads every shell code block of README.md and docs/*.md and
// returns the lines that run a command, without a leading "$ " and without
// a trailing comment.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	var out []docCommand
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		inBlock, inShell := false, false
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(line, "```"):
				inBlock = !inBlock
				inShell = inBlock && (line == "```sh" || line == "```console" || line == "```")
				continue
			case !inShell || line == "" || strings.HasPrefix(line, "#"):
				continue
			}
			line = strings.TrimPrefix(line, "$ ")
			if i := strings.Index(line, " #"); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if args := shellWords(line); len(args) > 0 && (args[0] == "acemq" || args[0] == "go" || args[0] == "./scripts/test") {
				out = append(out, docCommand{file: filepath.Base(file), line: n, args: args})
			}
		}
		f.Close()
	}
	return out
}

// shellWords splits a command line as a shell would, for the quoting the
// docs use: single and double quotes, "$VAR" kept as written.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDocsCommandsRun runs every acemq command the docs show against a
// memory broker holding the queues they name, and every go run of an
// example, so the docs cannot drift from the code. ./scripts/test is what
// runs this test.
func TestDocsCommandsRun(t *testing.T) {
	t.Setenv("ACEMQ_AMQP_URL", "amqp://operator:secret@broker.invalid/") // for commands written without --url
	cmds := docCommands(t)
	var acemqs, goRuns int
	for _, c := range cmds {
		name := c.file + ":" + strings.Join(c.args, " ")
		switch c.args[0] {
		case "acemq":
			acemqs++
			t.Run(name, func(t *testing.T) {
				b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: the warehouse is not answering", "the handler rejected it: no such customer")
				withDelays(t, b, "orders") // as a server that waits on them declares them
				args := make([]string, 0, len(c.args)-1)
				for _, a := range c.args[1:] {
					if strings.HasPrefix(a, "$") {
						a = "amqp://operator:secret@broker.invalid/" // the memory dialer ignores it
					}
					args = append(args, a)
				}
				code, stdout, stderr := cli(t, dial, args...)
				if code != 0 || stdout == "" {
					t.Errorf("%s:%d: exit %d\nstdout:\n%s\nstderr:\n%s", c.file, c.line, code, stdout, stderr)
				}
			})
		case "go":
			if len(c.args) < 3 || c.args[1] != "run" || !strings.HasPrefix(c.args[2], "./examples/") || len(c.args) > 3 {
				continue // a go run with a broker URL: the example's own test covers it
			}
			goRuns++
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, "go", "run", c.args[2])
				cmd.Dir = "../.."
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s:%d: go run %s: %v\n%s", c.file, c.line, c.args[2], err, out)
				}
			})
		}
	}
	if acemqs < 5 || goRuns < 1 {
		t.Errorf("found %d acemq commands and %d go runs in the docs; the scanner is broken", acemqs, goRuns)
	}
}

// TestDocsShowEveryCommand: every command the usage lists is run in a
// shell block of the docs, so TestDocsCommandsRun holds each to its docs.
func TestDocsShowEveryCommand(t *testing.T) {
	shown := map[string]bool{}
	for _, c := range docCommands(t) {
		if c.args[0] == "acemq" && len(c.args) > 1 {
			shown[c.args[1]] = true
		}
	}
	_, list, _ := strings.Cut(usage, "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var n int
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue // a description's second line
		}
		n++
		if name := strings.Fields(line)[0]; !shown[name] {
			t.Errorf("no shell block of the docs runs acemq %s", name)
		}
	}
	if n < 5 {
		t.Errorf("found %d commands in the usage; the scanner is broken", n)
	}
}

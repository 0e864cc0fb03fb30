// Command acemq is the operator's command line for acemq queues: see what a
// retry policy does, look at dead letters without taking them, put them back
// once the cause is fixed, declare a queue's topology (and the delay queues)
// for services that run without configure rights, and see what waits on the
// delay queues.
//
//	acemq schedule --queue shipping.orders --attempts 6 --initial 10s --max 10m
//	acemq peek     --queue orders.dlq --limit 20
//	acemq replay   --queue orders --from dlq --match warehouse --limit 500
//	acemq triage   orders.dlq
//	acemq topology --queue orders --attempts 5 --initial 1s --max 1m --apply
//	acemq topology --delays --queue orders --apply
//	acemq delays   --peek 20
//	acemq status   --queue orders
//	acemq web      --allow-actions
//
// The broker URL comes from --url or ACEMQ_AMQP_URL. Passwords are never
// printed; user names are (internal/redact states the rule). Every command takes --json. Exit status: 0 done, 1 failed, 2 the
// command line was wrong.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/redact"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// EnvURL is the environment variable read when --url is not given.
const EnvURL = "ACEMQ_AMQP_URL"

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

const usage = `acemq: the operator's command line for acemq queues.

Usage:
  acemq <command> [flags]

Commands:
  schedule   print the retry ladder a policy makes: each wait, and whether it
             is held in the process, on which rung queue, or on the delay
             queues (no broker needed)
  peek       list the messages of a queue (id, attempt, age, reason) and give
             them all back: nothing is consumed
  replay     move dead letters (or parked messages) back to their queue, once
             the cause is fixed
  triage     group a .dlq's (or .parked's) messages by reason, nothing
             consumed; replay a group, or discard it into an archive
  topology   print the declarations a consumer of a queue makes, or apply
             them with --apply (for services that run with declare off);
             --delays adds the delay queues
  delays     show what waits on the delay queues: messages per level, the
             undeliverable ones, and with --peek, per destination, when due
  version    print the version of acemq this binary was built from
  status     every acemq queue of the vhost, grouped by service: messages,
             ready, unacked, consumers and rates (management API), or the
             queues named with --queue
  web        a local dashboard of the same: status, triage groups, one
             message; replay or discard a group with --allow-actions

Run "acemq <command> --help" for a command's flags.
The broker URL is --url, or $ACEMQ_AMQP_URL. Passwords are never printed.
For amqps://: --tls-ca, --tls-cert, --tls-key, --tls-server-name (or
$ACEMQ_TLS_CA, $ACEMQ_TLS_CERT, $ACEMQ_TLS_KEY, $ACEMQ_TLS_SERVER_NAME).
Exit status: 0 done, 1 failed, 2 wrong command line.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, dialRabbitMQ))
}

func dialRabbitMQ(ctx context.Context, url string) (transport.Transport, error) {
	return rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq-cli"), rabbitmq.WithDialTimeout(15*time.Second), rabbitmq.WithTLS(tlsFrom(ctx)),
		rabbitmq.WithURLs(nodesFrom(ctx)...)) // nodes.go
}

// run is the whole command line: main wires it to the process, tests to a
// memory broker. All it prints goes through one redaction (internal/redact:
// the user shown, the password hidden), of the URL in use, of every URL
// given in a URL's place (--url, --management, $ACEMQ_AMQP_URL,
// $ACEMQ_MANAGEMENT_URL) and of every other argument that holds a
// password as a URL does, whatever printed it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, dial func(ctx context.Context, url string) (transport.Transport, error)) int {
	return runWith(ctx, args, os.Getenv, stdout, stderr, dial)
}

// runWith is run with the environment read through getenv.
func runWith(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, dial func(ctx context.Context, url string) (transport.Transport, error)) int {
	a := &app{ctx: ctx, dial: dial, getenv: getenv, now: time.Now, secrets: secretArgs(args).withVariables(getenv)}
	out, errOut := &redactWriter{w: stdout, redact: a.redact}, &redactWriter{w: stderr, redact: a.redact}
	defer out.Flush()
	defer errOut.Flush()
	a.stdout, a.stderr = out, errOut
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return exitUsage
	}
	cmds := map[string]func([]string) int{
		"schedule": a.schedule,
		"peek":     a.peek,
		"replay":   a.replay,
		"triage":   a.triage,
		"topology": a.topology,
		"delays":   a.delays,
		"version":  a.version,
		"status":   a.status,
		"web":      a.web,
	}
	switch name := args[0]; name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && cmds[args[1]] != nil {
			return cmds[args[1]]([]string{"--help"})
		}
		fmt.Fprint(a.stdout, usage)
		return exitOK
	default:
		cmd := cmds[name]
		if cmd == nil {
			fmt.Fprintf(a.stderr, "acemq: unknown command %q\n\n%s", name, usage)
			return exitUsage
		}
		return cmd(args[1:])
	}
}

// app carries what every command needs.
type app struct {
	ctx            context.Context
	stdout, stderr io.Writer
	dial           func(ctx context.Context, url string) (transport.Transport, error)
	getenv         func(string) string
	now            func() time.Time // wall clock, for progress lines
	url            string           // the broker URL in use, to redact from errors
	secrets        secrets          // what of the command line might hold a password
}

// flags makes a command's flag set, with --json and, for commands that
// talk to a broker, --url.
func (a *app) flags(name, synopsis, about string, broker bool) (*flag.FlagSet, *bool, *string) {
	fs := flag.NewFlagSet("acemq "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	url := new(string)
	if broker {
		fs.StringVar(url, "url", "", "broker URL, amqp://user:password@host:5672/vhost (default $"+EnvURL+")")
		tlsFlags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  acemq %s %s\n\n%s\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs, asJSON, url
}

// parse parses args into fs; done says the command should return code now
// (after --help, or a wrong command line). The flag package's errors quote
// the value they refuse; they are printed here, redacted.
func (a *app) parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(a.stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(a.stdout)
			fs.Usage()
			return exitOK, true
		}
		fmt.Fprintln(a.stderr, a.redact(err.Error()))
		fs.Usage()
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		return a.usageError(fs, "unexpected argument %q", fs.Arg(0)), true
	}
	return 0, false
}

// usageError prints a wrong command line, redacted: it may quote an
// argument.
func (a *app) usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "%s: %s\nRun \"%s --help\" for its flags.\n", fs.Name(), a.redact(fmt.Sprintf(format, args...)), fs.Name())
	return exitUsage
}

// connect dials the broker of --url or $ACEMQ_AMQP_URL. A URL that does not
// parse is a wrong command line, said without showing the URL.
func (a *app) connect(fs *flag.FlagSet, url string) (transport.Transport, int) {
	from := "--url"
	if url == "" {
		url, from = a.getenv(EnvURL), "$"+EnvURL
	}
	if url == "" {
		return nil, a.usageError(fs, "no broker: give --url or set $%s", EnvURL)
	}
	a.url = url
	if err := amqpconn.CheckURL(url); err != nil {
		return nil, a.usageError(fs, "%s: %v", from, err)
	}
	cfg, err := a.tlsConfig(fs)
	if err != nil {
		return nil, a.usageError(fs, "%v", err)
	}
	if cfg != nil && !strings.HasPrefix(url, "amqps://") {
		return nil, a.usageError(fs, "the TLS flags are for amqps:// (port 5671 by default); %s is not one", from)
	}
	t, err := a.dial(withTLS(a.ctx, cfg), url)
	if err != nil {
		if strings.HasPrefix(url, "amqps://") {
			err = a.explainTLS(fs, url, err)
		}
		if !strings.Contains(a.redact(err.Error()), redact.URL(url)) {
			err = fmt.Errorf("connect to %s: %w", redact.URL(url), err)
		}
		return nil, a.fail(fs, err)
	}
	return t, exitOK
}

// fail prints err, with the broker's password redacted, and returns the
// failure status.
func (a *app) fail(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(a.stderr, "%s: %s\n", fs.Name(), a.redact(err.Error()))
	return exitError
}

// redact removes from s the password of the URL in use and of every
// argument that might hold one.
func (a *app) redact(s string) string { return a.secrets.redact(s, a.url) }

// printJSON prints v indented, with every rune a terminal would act on
// written as a \u escape (escape.JSON): a decoder reads the same strings.
func (a *app) printJSON(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	_, _ = a.stdout.Write(escape.JSON(buf.Bytes()))
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
)

// everyCommand is a command line of each command that runs (on a memory
// broker) or fails after reading its flags; "U" stands for the broker URL.
func everyCommand(dir string) [][]string {
	return [][]string{
		{"schedule", "--queue", "orders", "--attempts", "3", "--initial", "1s"},
		{"peek", "--url", "U", "--queue", "orders.dlq", "--body"},
		{"peek", "--url", "U", "--queue", "orders", "--json"},
		{"replay", "--url", "U", "--queue", "orders", "--match", "warehouse"},
		{"triage", "--url", "U", "orders.dlq"},
		{"triage", "--url", "U", "orders.dlq", "--json", "--discard", "g00000000", "--why", "test", "--operator", "o", "--to-file", filepath.Join(dir, "a.jsonl")},
		{"topology", "--url", "U", "--queue", "orders", "--attempts", "3", "--initial", "1s", "--apply"},
		{"topology", "--json", "--queue", "orders", "--attempts", "3", "--initial", "1m"},
		{"delays", "--url", "U", "--peek", "2"},
		{"status", "--url", "U", "--json"},
		{"version", "--json"},
		{"web", "--url", "U", "--listen", "256.0.0.1:0"},
	}
}

// slot is where a marked password is put in a command line: the value of
// a URL's place (the marker anywhere in it), or of any other argument or
// variable (a URL holding the marker in its password).
type slot struct {
	name     string
	urlPlace bool
	put      func(args []string, env map[string]string, v string) []string
}

// setFlag sets --name v, replacing its value when args has the flag.
func setFlag(args []string, name, v string) []string {
	if i := slices.Index(args, "--"+name); i >= 0 && i+1 < len(args) {
		args[i+1] = v
		return args
	}
	return append(args, "--"+name, v)
}

var slots = []slot{
	{"--url", true, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "url", v) }},
	{"--url=", true, func(a []string, _ map[string]string, v string) []string {
		if i := slices.Index(a, "--url"); i >= 0 {
			a = slices.Delete(a, i, i+2)
		}
		return append(a, "--url="+v)
	}},
	{"$" + EnvURL, true, func(a []string, env map[string]string, v string) []string {
		env[EnvURL] = v
		if i := slices.Index(a, "--url"); i >= 0 {
			a = slices.Delete(a, i, i+2)
		}
		return a
	}},
	{"--management", true, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "management", v) }},
	{"$" + EnvManagement, true, func(a []string, env map[string]string, v string) []string { env[EnvManagement] = v; return a }},
	{"--tls-ca", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "tls-ca", v) }},
	{"--tls-cert", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "tls-cert", v) }},
	{"--tls-key", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "tls-key", v) }},
	{"--tls-server-name", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "tls-server-name", v) }},
	{"$" + EnvTLSCA, false, func(a []string, env map[string]string, v string) []string { env[EnvTLSCA] = v; return a }},
	{"$" + EnvTLSKey, false, func(a []string, env map[string]string, v string) []string { env[EnvTLSKey] = v; return a }},
	{"$" + EnvTLSServerName, false, func(a []string, env map[string]string, v string) []string { env[EnvTLSServerName] = v; return a }},
	{"--queue", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "queue", v) }},
	{"--why", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "why", v) }},
	{"--operator", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "operator", v) }},
	{"--match", false, func(a []string, _ map[string]string, v string) []string { return setFlag(a, "match", v) }},
	{"positional", false, func(a []string, _ map[string]string, v string) []string { return append(a, v) }},
	{"--flag=", false, func(a []string, _ map[string]string, v string) []string { return append(a, "--attempts="+v) }},
	{"--name", false, func(a []string, _ map[string]string, v string) []string { return append(a, "--"+v) }},
}

// FuzzCLIEveryCommand: a password holding the marker, put in any argument
// or variable of any command, is in nothing the command prints, whether the
// broker is there (a memory broker) or refuses with an error that quotes
// the URL as amqp091-go's do. In a URL's place the marker may stand
// anywhere a password can (a URL that does not parse, a password pasted
// alone); elsewhere it is in the password of a URL: text without one is no
// credential (internal/redact).
func FuzzCLIEveryCommand(f *testing.F) {
	for i, s := range [][4]string{
		{"amqp", "guest", "", ""}, {"amqp", "guest", "50pct#", ""}, {"amqp", "u", "a@", "@b"},
		{"amqp", "u", "1/", ""}, {"http", "ops", "", ""}, {"amqps", "u", "\t", "\x7f"}, {"", "u", "=", "\""},
	} {
		for c := range len(everyCommand("")) {
			f.Add(uint8(c), uint8(i*3+c), uint8(c%3), s[0], s[1], s[2], s[3])
		}
	}
	const marker = "S3cr3tMarker"
	f.Fuzz(func(t *testing.T, cmd, where, form uint8, scheme, user, pre, post string) {
		scheme, user = strings.ReplaceAll(scheme, marker, ""), strings.ReplaceAll(user, marker, "")
		pw := pre + marker + post
		withHost := scheme + "://" + user + ":" + pw + "@127.0.0.1:1/vh"
		commands := everyCommand(t.TempDir())
		args := slices.Clone(commands[int(cmd)%len(commands)])
		s := slots[int(where)%len(slots)]
		v := withHost
		if s.urlPlace {
			v = []string{withHost, scheme + "://" + user + ":" + pw, pw}[form%3]
			if v != withHost {
				if at := strings.LastIndex(v, "@"); amqpconn.CheckURL(v) == nil || at >= 0 && strings.LastIndex(v, marker) > at {
					v = withHost // a URL without a password, as written: nothing to hide
				}
			}
		}
		env := map[string]string{}
		args = s.put(args, env, v)
		for i, a := range args {
			if a == "U" {
				args[i] = "amqp://guest@127.0.0.1:1/"
			}
		}
		b, memDial := memoryBroker(t, "orders", "exhausted 3 attempts: warehouse timeout", "the handler rejected it: no such customer")
		_ = b
		dial := memDial
		if form&4 != 0 { // the broker refuses, and the error quotes the URL
			dial = func(_ context.Context, url string) (transport.Transport, error) {
				return nil, fmt.Errorf("dial %s: %q refused (%v)", url, url, []string{url})
			}
		}
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runWith(ctx, args, func(k string) string { return env[k] }, &out, &errOut, dial)
		if strings.Contains(out.String()+errOut.String(), marker) {
			t.Fatalf("%q with %s = %q (env %q) printed the marker:\n%s%s", args, s.name, v, env, out.String(), errOut.String())
		}
	})
}
